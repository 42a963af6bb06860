"""OpenTelemetry spans, as the SDK's in-memory exporter receives them: a request is a server
span continuing its caller's trace; the run it starts is its child; each model turn, tool
call and checkpoint write of the run is the run's child, with the run's ids."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from runpoint.adapters import auth
from runpoint.adapters.litestar import build
from runpoint.adapters.tracing import Tracing
from runpoint.facade import Runpoint
from runpoint.plugins.demo import agents
from runpoint.plugins.scripted import ScriptedModel
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost
from runpoint.seams.model import ModelRequest, ModelResponse

from .conftest import bearer, write_keys

pytestmark = pytest.mark.memory  # storage is not the subject here

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CALLER = "b7ad6b7169203331"  # the caller's span, in its traceparent header
TRACEPARENT = f"00-{TRACE_ID}-{CALLER}-01"


def vendor_down(request: ModelRequest) -> ModelResponse:
    raise ConnectionError("the vendor is down")


broken = Agent(id="broken", model=ScriptedModel(vendor_down, name="scripted:down"))
Client = AsyncTestClient[Litestar]


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def traced(exporter: InMemorySpanExporter) -> Callable[..., Litestar]:
    """An app whose spans go to `exporter` (its own provider, not the process's)."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    def app(**options: Any) -> Litestar:
        host = PluginHost([Tracing(provider)])
        return build(Runpoint([*agents, broken], database="memory:", host=host), **options)

    return app


@pytest.fixture
async def client(traced: Callable[..., Litestar]) -> AsyncIterator[Client]:
    async with AsyncTestClient(traced()) as client:
        yield client


def named(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    [span] = [s for s in spans if s.name == name]
    return span


def children(spans: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[ReadableSpan]:
    """The spans under `parent`, in the order they started."""
    found = [s for s in spans if s.parent and s.parent.span_id == parent.context.span_id]
    return sorted(found, key=lambda s: s.start_time or 0)


async def test_a_run_with_a_tool_call_is_a_tree_of_spans_under_its_request(
    client: Client, exporter: InMemorySpanExporter
) -> None:
    answer = await client.post(
        "/agents/travel-agent/runs",
        data={"message": "Paris", "stream": "false", "session_id": "s1"},
        headers={"traceparent": TRACEPARENT},
    )
    run = answer.json()
    timeline = (
        await client.get(f"/agents/travel-agent/runs/{run['run_id']}/checkpoints?session_id=s1")
    ).json()["checkpoints"]
    spans = exporter.get_finished_spans()

    request = named(spans, "POST /agents/{agent_id}/runs")
    assert request.kind is SpanKind.SERVER
    assert request.context.trace_id == int(TRACE_ID, 16)  # the caller's trace, continued
    assert request.parent is not None and request.parent.span_id == int(CALLER, 16)
    assert request.attributes == {
        "http.request.method": "POST",
        "http.route": "/agents/{agent_id}/runs",
        "url.path": "/agents/travel-agent/runs",
        "url.scheme": "http",
        "http.response.status_code": 200,
    }

    ids = {"runpoint.run_id": run["run_id"], "runpoint.session_id": "s1"}
    ids["runpoint.agent_id"] = "travel-agent"
    [execution] = children(spans, request)
    assert execution.name == "invoke_agent travel-agent"
    assert execution.attributes == ids | {
        "gen_ai.operation.name": "invoke_agent",
        "runpoint.run.status": "COMPLETED",
    }
    steps = children(spans, execution)
    assert [s.name for s in steps] == [
        "chat demo",
        "execute_tool get_population",
        "write_checkpoint",  # the tool batch's
        "chat demo",
        "write_checkpoint",  # the end's
    ]
    for step in steps:
        assert step.context.trace_id == int(TRACE_ID, 16)
        assert step.attributes is not None and ids.items() <= step.attributes.items()
        assert execution.start_time <= step.start_time <= step.end_time <= execution.end_time  # type: ignore[operator]
        assert step.status.status_code is StatusCode.UNSET
    asked, called, batch, answered, end = steps
    assert asked.kind is SpanKind.CLIENT
    assert {k: v for k, v in (asked.attributes or {}).items() if k not in ids} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "demo",
        "runpoint.model": "scripted:demo",
        "gen_ai.usage.input_tokens": run["messages"][1]["metrics"]["input_tokens"],
        "gen_ai.usage.output_tokens": run["messages"][1]["metrics"]["output_tokens"],
    }
    [tool] = run["tools"]
    assert called.attributes == ids | {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_population",
        "gen_ai.tool.call.id": tool["tool_call_id"],
    }
    for span, checkpoint in zip([batch, end], timeline, strict=True):
        assert span.attributes == ids | {
            "runpoint.checkpoint.id": checkpoint["checkpoint_id"],
            "runpoint.checkpoint.message_index": checkpoint["message_index"],
            "runpoint.checkpoint.reason": checkpoint["reason"],
            "runpoint.checkpoint.policy": "tool-batch",
        }
    assert answered.attributes is not None and answered.attributes["gen_ai.usage.output_tokens"]


async def test_a_failed_model_call_is_an_error_span_with_its_exception(
    client: Client, exporter: InMemorySpanExporter
) -> None:
    run = (
        await client.post("/agents/broken/runs", data={"message": "Paris", "stream": "false"})
    ).json()
    assert run["status"] == "ERROR"
    spans = exporter.get_finished_spans()
    execution = named(spans, "invoke_agent broken")
    assert execution.status.status_code is StatusCode.ERROR
    assert execution.status.description == "ConnectionError: the vendor is down"
    call, end = children(spans, execution)
    assert (call.name, end.name) == ("chat down", "write_checkpoint")  # it ends where it began
    assert call.status.status_code is StatusCode.ERROR
    assert call.attributes is not None and call.attributes["error.type"] == "ConnectionError"
    [event] = call.events
    assert event.name == "exception" and event.attributes is not None
    assert event.attributes["exception.message"] == "the vendor is down"


async def test_a_refused_request_is_a_span_with_its_status(
    traced: Callable[..., Litestar], exporter: InMemorySpanExporter, tmp_path: Any
) -> None:
    keys = auth.load(api_keys_file=str(write_keys(tmp_path / "keys.yaml")))
    async with AsyncTestClient(traced(auth=keys)) as client:
        assert (await client.get("/sessions/s1/runs")).status_code == 401
        missing = await client.get("/agents/nobody", headers=bearer("alpha-key"))
        assert missing.status_code == 404
    refused, unknown = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    assert refused.name == "GET /sessions/{session_id}/runs"
    assert unknown.name == "GET /agents/{agent_id}"
    for span, status in [(refused, 401), (unknown, 404)]:
        assert span.attributes is not None
        assert span.attributes["http.response.status_code"] == status
        assert span.status.status_code is StatusCode.UNSET  # a client's mistake, not ours
        assert not span.events
