"""OpenTelemetry spans for what runs do, from the run hooks: one span per execution of a run,
and in it one per model turn, tool call and checkpoint write, each with the run's, session's
and agent's ids. Names and attributes follow OpenTelemetry's generative-AI conventions
where they have one (`invoke_agent`, `chat`, `execute_tool`); docs/operations.md lists them.

opentelemetry is an optional extra (`pip install 'runpoint[otel]'`): this module imports it
only when a `Tracing` is made, so a server that does not trace never loads it.
"""

from __future__ import annotations

import os
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

from runpoint import hookimpl
from runpoint.core.errors import ConfigurationError
from runpoint.core.schedule import Schedule, ScheduleRun
from runpoint.core.types import Checkpoint, Message, Run, RunStatus, Timing
from runpoint.seams.retention import RETAINED, Removed

if TYPE_CHECKING:
    from opentelemetry.trace import Span, TracerProvider

# what OTEL_TRACES_EXPORTER may name when runpoint sets the SDK up (see `provider_from_env`)
EXPORTERS = ("otlp", "console", "none")


class Tracing:
    """Spans through `provider`, by default the process's (OpenTelemetry's global one)."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        from opentelemetry import trace

        self.provider = provider or trace.get_tracer_provider()
        self.tracer = self.provider.get_tracer("runpoint", version("runpoint"))
        self._runs: dict[str, Span] = {}  # the span of each execution under way, by run id

    @hookimpl
    def runpoint_run_started(self, run: Run) -> None:
        # a child of the current span: the request's that started or continued the run
        self._runs[run.run_id] = self.tracer.start_span(
            f"invoke_agent {run.agent_id}",
            attributes=ids(run) | {"gen_ai.operation.name": "invoke_agent"},
        )

    @hookimpl
    def runpoint_run_finished(self, run: Run) -> None:
        from opentelemetry.trace import StatusCode

        if (span := self._runs.pop(run.run_id, None)) is None:
            return
        span.set_attribute("runpoint.run.status", run.status.value)
        if run.status is RunStatus.ERROR:
            span.set_status(StatusCode.ERROR, run.error)
        span.end()

    @hookimpl
    def runpoint_model_turn_done(
        self, run: Run, model: str, message: Message | None, error: Exception | None, timing: Timing
    ) -> None:
        # "provider:name", as model strings are (a fine-tuned model's name has colons too)
        provider, _, name = model.partition(":") if ":" in model else ("", "", model)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": name,
            "runpoint.model": model,
        }
        if provider:
            attributes["gen_ai.provider.name"] = provider
        if message is not None and message.usage is not None:
            attributes["gen_ai.usage.input_tokens"] = message.usage.input_tokens
            attributes["gen_ai.usage.output_tokens"] = message.usage.output_tokens
            # of the input tokens, as the semantic conventions count them; where there are any
            cached = {
                "gen_ai.usage.cache_read.input_tokens": message.usage.cache_read_tokens,
                "gen_ai.usage.cache_creation.input_tokens": message.usage.cache_write_tokens,
            }
            attributes |= {k: v for k, v in cached.items() if v}
        self._span(run, f"chat {name}", timing, attributes, error=error, client=True)

    @hookimpl
    def runpoint_tool_call_done(self, run: Run, message: Message, timing: Timing) -> None:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": message.tool_name,
            "gen_ai.tool.call.id": message.tool_call_id,
        }
        # an error's result says what went wrong, and may hold a user's data: not recorded
        name = f"execute_tool {message.tool_name}"
        self._span(run, name, timing, attributes, failed=message.tool_call_error)

    @hookimpl
    def runpoint_checkpoint_written(self, run: Run, checkpoint: Checkpoint, timing: Timing) -> None:
        attributes = {
            "runpoint.checkpoint.id": checkpoint.checkpoint_id,
            "runpoint.checkpoint.message_index": checkpoint.message_index,
            "runpoint.checkpoint.reason": checkpoint.reason,
            "runpoint.checkpoint.policy": checkpoint.policy,
        }
        self._span(run, "write_checkpoint", timing, attributes)

    @hookimpl
    def runpoint_retention_swept(self, removed: Removed, timing: Timing) -> None:
        start = int(timing.started_at * 1e9)
        attributes = {f"runpoint.retention.{kind}": getattr(removed, kind) for kind in RETAINED}
        span = self.tracer.start_span(
            "retention_sweep",
            context=None,  # a root: no request asked for it
            attributes=attributes | {"runpoint.retention.bytes": removed.size},
            start_time=start,
        )
        span.end(end_time=start + int(timing.seconds * 1e9))

    @hookimpl
    def runpoint_schedule_fired(self, schedule: Schedule, fired: ScheduleRun, delay: float) -> None:
        attributes: dict[str, str | float] = {
            "runpoint.schedule.id": schedule.schedule_id,
            "runpoint.schedule.tick": fired.tick,
            "runpoint.schedule.delay_seconds": delay,
            "runpoint.run.id": fired.run_id,
            "runpoint.agent.id": schedule.agent_id,
        }
        start = int(fired.tick * 1e9)
        span = self.tracer.start_span(
            "schedule_fire", context=None, attributes=attributes, start_time=start
        )  # a root: from the tick's time to its run being made
        span.end(end_time=start + int(delay * 1e9))

    def _span(
        self,
        run: Run,
        name: str,
        timing: Timing,
        attributes: dict[str, Any],
        *,
        error: Exception | None = None,
        failed: bool = False,
        client: bool = False,
    ) -> None:
        """A span, ended already, under the run's execution: what a hook's timing says."""
        from opentelemetry.trace import SpanKind, StatusCode, set_span_in_context

        parent = self._runs.get(run.run_id)
        start = int(timing.started_at * 1e9)
        span = self.tracer.start_span(
            name,
            context=set_span_in_context(parent) if parent is not None else None,
            kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
            attributes=ids(run) | attributes,
            start_time=start,
        )
        if error is not None:
            span.record_exception(error)
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(StatusCode.ERROR, f"{type(error).__name__}: {error}")
        elif failed:
            span.set_status(StatusCode.ERROR)
        span.end(end_time=start + int(timing.seconds * 1e9))


def ids(run: Run) -> dict[str, Any]:
    """The attributes every span of a run carries."""
    return {
        "runpoint.run_id": run.run_id,
        "runpoint.session_id": run.session_id,
        "runpoint.agent_id": run.agent_id,
    }


def provider_from_env() -> TracerProvider:
    """The process's tracer provider if something set one up (`opentelemetry-instrument`, an
    embedding program), else the SDK's, set up from the standard variables and made the
    process's: OTEL_SERVICE_NAME (runpoint by default) and OTEL_RESOURCE_ATTRIBUTES,
    OTEL_TRACES_SAMPLER, OTEL_TRACES_EXPORTER (a list of `otlp`, the default: OTLP over
    HTTP, its OTEL_EXPORTER_OTLP_* variables read by the exporter; `console`; `none`),
    OTEL_BSP_*, and OTEL_SDK_DISABLED."""
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError as exc:
        raise ConfigurationError(
            f"tracing needs OpenTelemetry's SDK, and {exc.name} is not installed: "
            "pip install 'runpoint[otel]'"
        ) from exc

    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):  # set up already
        return current
    exporters = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").lower().replace(" ", "").split(",")
    if unknown := [e for e in exporters if e not in EXPORTERS]:
        raise ValueError(
            f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}: runpoint sets up "
            f"{', '.join(EXPORTERS)}; for others, run it under opentelemetry-instrument"
        )
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "runpoint"}))
    provider = TracerProvider(resource=resource)
    if "otlp" in exporters:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if "console" in exporters:  # each span as it ends: a console is read as things happen
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
    trace.set_tracer_provider(provider)
    return provider
