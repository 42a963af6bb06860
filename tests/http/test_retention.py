"""DELETE of a session forked elsewhere: 204, and its fork answers byte for byte as before;
a fork whose source retention removed meanwhile: 404, not a fork missing rows nor a 500; a
sweep observed (a log line, Prometheus counters, a span)."""

from __future__ import annotations

import logging

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runpoint.adapters.litestar import build
from runpoint.adapters.metrics import Metrics
from runpoint.adapters.tracing import Tracing
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.seams.host import PluginHost
from runpoint.seams.retention import Retention
from tests.kernel.test_retention_races import swept_before_writes

from .test_metrics import parse, value

Client = AsyncTestClient[Litestar]


async def reads(client: Client, session_id: str) -> list[bytes]:
    """The session's runs, each one's timeline and each snapshot, as served."""
    found = [(await client.get(f"/sessions/{session_id}/runs")).content]
    for run in (await client.get(f"/sessions/{session_id}/runs")).json():
        base = f"/agents/travel-agent/runs/{run['run_id']}"
        found.append((await client.get(base, params={"session_id": session_id})).content)
        timeline = await client.get(f"{base}/checkpoints", params={"session_id": session_id})
        found.append(timeline.content)
        for checkpoint in timeline.json()["checkpoints"]:
            at = f"{base}/checkpoints/{checkpoint['message_index']}"
            found.append((await client.get(at, params={"session_id": session_id})).content)
    return found


async def test_a_source_session_is_deleted_under_its_fork(client: Client) -> None:
    body = {"message": "Paris, Tokyo and Lagos", "stream": "false"}
    run = (await client.post("/agents/travel-agent/runs", data=body)).json()
    source = run["session_id"]
    fork = (await client.post(f"/agents/travel-agent/sessions/{source}/fork")).json()
    before = await reads(client, fork["session_id"])
    assert len(before) > 4
    assert (await client.delete(f"/sessions/{source}")).status_code == 204
    assert (await client.get(f"/sessions/{source}")).status_code == 404
    assert await reads(client, fork["session_id"]) == before
    assert (await client.delete(f"/sessions/{fork['session_id']}")).status_code == 204


async def test_a_fork_of_a_source_swept_meanwhile_is_404(database: str) -> None:
    rp = Runpoint(agents, database=database, retention=Retention(runs=0))
    async with AsyncTestClient(build(rp)) as client:
        body = {"message": "Paris, Tokyo and Lagos", "stream": "false"}
        run = (await client.post("/agents/travel-agent/runs", data=body)).json()
        source = run["session_id"]
        with swept_before_writes(rp):
            forked = await client.post(f"/agents/travel-agent/sessions/{source}/fork")
            again = await client.post(
                f"/agents/travel-agent/runs/{run['run_id']}/continue",
                data={"continue_from": "3", "session_id": source, "stream": "false"},
            )
        assert (forked.status_code, again.status_code) == (404, 404), forked.text
        assert (await client.get("/sessions")).json()["data"] == []


async def test_a_sweep_is_a_log_line_counters_and_a_span(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    metrics, exporter = Metrics(), InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    host = PluginHost([metrics, Tracing(provider)])
    policy = Retention(runs=0)
    async with Runpoint(agents, database=database, host=host, retention=policy) as rp:
        before = parse((await metrics.scrape(rp))[0].decode())
        await (await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))).result()
        with caplog.at_level(logging.INFO, logger="runpoint.retention"):
            removed = await rp.sweeper.sweep_in_turn()
        after = parse((await metrics.scrape(rp))[0].decode())
    assert removed is not None and removed.runs == 1 and removed.messages > 0
    [line] = [r.getMessage() for r in caplog.records if r.name == "runpoint.retention"]
    assert line.startswith("retention sweep: 1 runs, 1 sessions, ")

    def grew(name: str, **labels: str) -> float:
        return (value(after, name, **labels) or 0) - (value(before, name, **labels) or 0)

    assert grew("runpoint_retention_removed_total", kind="runs") == 1
    assert grew("runpoint_retention_removed_total", kind="sessions") == 1
    assert grew("runpoint_retention_removed_total", kind="messages") == removed.messages
    assert grew("runpoint_retention_removed_bytes_total") == removed.size > 0
    assert grew("runpoint_retention_reclaimed_bytes_total") == removed.reclaimed
    assert grew("runpoint_retention_sweep_seconds_count") == 1
    [span] = [s for s in exporter.get_finished_spans() if s.name == "retention_sweep"]
    assert span.attributes is not None
    assert (span.attributes["runpoint.retention.runs"], span.parent) == (1, None)
