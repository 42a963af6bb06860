"""Prometheus metrics, served at /metrics: what runs did, counted from the run hooks, and
what this process holds now (runs executing, runs queued), read at each scrape.
docs/operations.md lists them.

prometheus_client is an optional extra (`pip install 'runpoint[otel]'`). It is imported at
the first run or scrape, not at start-up: importing it costs about a tenth of a second.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import TYPE_CHECKING

import msgspec

from runpoint import hookimpl
from runpoint.core.schedule import Schedule, ScheduleRun
from runpoint.core.types import Checkpoint, Message, Run, Timing
from runpoint.seams.retention import RETAINED, Removed
from runpoint.seams.storage import Encrypted

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    from runpoint.facade import Runpoint

# histogram buckets, in seconds: a model's turn takes seconds to minutes, a tool's
# anything (and a schedule's fire delay, which a busy minute of ticks stretches to tens of
# seconds), a checkpoint write (one transaction) milliseconds
MODEL_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
TOOL_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
WRITE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)


def installed() -> bool:
    """Whether prometheus_client can be imported (found without importing it)."""
    return importlib.util.find_spec("prometheus_client") is not None


@dataclass(frozen=True)
class Instruments:
    registry: CollectorRegistry
    runs_finished: Counter
    runs_active: Gauge
    queue_depth: Gauge
    recoveries: Counter
    storage_failures: Counter
    integrity_failures: Counter
    checkpoint_seconds: Histogram
    model_seconds: Histogram
    tool_seconds: Histogram
    model_tokens: Counter
    retention_removed: Counter
    retention_bytes: Counter
    retention_reclaimed: Counter
    retention_sweeps: Histogram
    schedule_fired: Counter
    schedule_missed: Counter
    schedule_retried: Counter
    schedule_delay: Histogram

    @classmethod
    def make(cls) -> Instruments:
        """A registry of its own (each app counts its own runs), with the process's own
        metrics (CPU, memory, file descriptors, garbage collection) as the default has."""
        from prometheus_client import (
            CollectorRegistry,
            Counter,
            Gauge,
            GCCollector,
            Histogram,
            PlatformCollector,
            ProcessCollector,
        )

        r = CollectorRegistry()
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=r)
        agent = ["agent_id"]
        return cls(
            registry=r,
            runs_finished=Counter(
                "runpoint_runs_finished",
                "Executions of runs that stopped, by agent and the status they stopped in",
                [*agent, "status"],
                registry=r,
            ),
            runs_active=Gauge(
                "runpoint_runs_active", "Runs this process executes now", agent, registry=r
            ),
            queue_depth=Gauge(
                "runpoint_queue_depth",
                "Runs waiting in the run queue for a process (PostgreSQL only)",
                agent,
                registry=r,
            ),
            recoveries=Counter(
                "runpoint_run_recoveries",
                "Runs this process resumed after their process died",
                agent,
                registry=r,
            ),
            storage_failures=Counter(
                "runpoint_storage_failures",
                "Requests and writes that met the database down (unavailable) or its disk "
                "full (full)",
                ["kind"],
                registry=r,
            ),
            integrity_failures=Counter(
                "runpoint_integrity_failures",
                "Stored rows of an encrypted database refused: in the clear, under a key "
                "the keyring lacks, or failing authentication (each logged by its ids)",
                registry=r,
            ),
            checkpoint_seconds=Histogram(
                "runpoint_checkpoint_write_seconds",
                "How long writing a checkpoint (with the messages it closes) took",
                agent,
                registry=r,
                buckets=WRITE_BUCKETS,
            ),
            model_seconds=Histogram(
                "runpoint_model_call_seconds",
                "How long a model turn took, by agent and model provider",
                [*agent, "provider"],
                registry=r,
                buckets=MODEL_BUCKETS,
            ),
            tool_seconds=Histogram(
                "runpoint_tool_call_seconds",
                "How long a tool call took, by agent and tool",
                [*agent, "tool"],
                registry=r,
                buckets=TOOL_BUCKETS,
            ),
            model_tokens=Counter(
                "runpoint_model_tokens",
                "Tokens of model turns as the vendor reported them, by agent, model provider "
                "and kind: input (every prompt token), output, and of input, cache_read "
                "(read from the vendor's prompt cache) and cache_write (written to it)",
                [*agent, "provider", "kind"],
                registry=r,
            ),
            retention_removed=Counter(
                "runpoint_retention_removed",
                "Rows retention sweeps of this process removed, by kind (runs, sessions, "
                "messages, checkpoints, events)",
                ["kind"],
                registry=r,
            ),
            retention_bytes=Counter(
                "runpoint_retention_removed_bytes",
                "Bytes of the documents retention sweeps of this process removed",
                registry=r,
            ),
            retention_reclaimed=Counter(
                "runpoint_retention_reclaimed_bytes",
                "Bytes of the database file retention sweeps returned to the file system (SQLite)",
                registry=r,
            ),
            retention_sweeps=Histogram(
                "runpoint_retention_sweep_seconds",
                "How long a retention sweep of this process took",
                registry=r,
                buckets=WRITE_BUCKETS,
            ),
            schedule_fired=Counter(
                "runpoint_schedule_ticks_fired",
                "Schedule ticks this process fired as runs",
                ["agent_id"],
                registry=r,
            ),
            schedule_missed=Counter(
                "runpoint_schedule_ticks_missed",
                "Schedule ticks passed over that fired nothing (no server ran then)",
                ["agent_id"],
                registry=r,
            ),
            schedule_retried=Counter(
                "runpoint_schedule_runs_retried",
                "Failed runs of schedules continued from their last checkpoint",
                ["agent_id"],
                registry=r,
            ),
            schedule_delay=Histogram(
                "runpoint_schedule_fire_delay_seconds",
                "From a tick's time to its run being made",
                registry=r,
                buckets=TOOL_BUCKETS,
            ),
        )


class Metrics:
    """The run hooks counted in Prometheus instruments, made at first use."""

    def __init__(self) -> None:
        self._made: Instruments | None = None
        self._failures: dict[str, int] = {}  # the storage failures counted so far, by kind

    @property
    def instruments(self) -> Instruments:
        if self._made is None:
            self._made = Instruments.make()
        return self._made

    @hookimpl
    def runpoint_run_finished(self, run: Run) -> None:
        self.instruments.runs_finished.labels(run.agent_id, run.status.value).inc()

    @hookimpl
    def runpoint_run_recovered(self, run: Run) -> None:
        self.instruments.recoveries.labels(run.agent_id).inc()

    @hookimpl
    def runpoint_checkpoint_written(self, run: Run, checkpoint: Checkpoint, timing: Timing) -> None:
        self.instruments.checkpoint_seconds.labels(run.agent_id).observe(timing.seconds)

    @hookimpl
    def runpoint_model_turn_done(
        self, run: Run, model: str, message: Message | None, timing: Timing
    ) -> None:
        # the provider, not the model: a continue may name any model string, and a label's
        # values must stay few
        provider = model.partition(":")[0]
        made = self.instruments
        made.model_seconds.labels(run.agent_id, provider).observe(timing.seconds)
        if message is None or message.usage is None:
            return
        for kind, count in msgspec.structs.asdict(message.usage).items():
            made.model_tokens.labels(run.agent_id, provider, kind.removesuffix("_tokens")).inc(
                count
            )

    @hookimpl
    def runpoint_tool_call_done(self, run: Run, message: Message, timing: Timing) -> None:
        tool = message.tool_name or ""
        self.instruments.tool_seconds.labels(run.agent_id, tool).observe(timing.seconds)

    @hookimpl
    def runpoint_retention_swept(self, removed: Removed, timing: Timing) -> None:
        made = self.instruments
        for kind in RETAINED:
            made.retention_removed.labels(kind).inc(getattr(removed, kind))
        made.retention_bytes.inc(removed.size)
        made.retention_reclaimed.inc(removed.reclaimed)
        made.retention_sweeps.observe(timing.seconds)

    @hookimpl
    def runpoint_schedule_fired(self, schedule: Schedule, fired: ScheduleRun, delay: float) -> None:
        self.instruments.schedule_fired.labels(schedule.agent_id).inc()
        self.instruments.schedule_delay.observe(delay)

    @hookimpl
    def runpoint_schedule_missed(self, schedule: Schedule, ticks: int) -> None:
        self.instruments.schedule_missed.labels(schedule.agent_id).inc(ticks)

    @hookimpl
    def runpoint_schedule_retried(self, schedule: Schedule, fired: ScheduleRun) -> None:
        self.instruments.schedule_retried.labels(schedule.agent_id).inc()

    async def scrape(self, rp: Runpoint) -> tuple[bytes, str]:
        """The text exposition of every metric, and its media type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        made = self.instruments
        executing = rp.executing()
        for agent_id in rp.agents:
            made.runs_active.labels(agent_id).set(executing[agent_id])
        if (queued := await rp.queued()) is not None:
            for agent_id in rp.agents.keys() | queued.keys():
                made.queue_depth.labels(agent_id).set(queued.get(agent_id, 0))
        for kind in ("unavailable", "full"):
            met = rp.outages.counts[kind]
            made.storage_failures.labels(kind).inc(met - self._failures.get(kind, 0))
            self._failures[kind] = met
        if isinstance(rp.storage, Encrypted):
            refused = rp.storage.codec.failures
            made.integrity_failures.inc(refused - self._failures.get("integrity", 0))
            self._failures["integrity"] = refused
        return generate_latest(made.registry), CONTENT_TYPE_LATEST
