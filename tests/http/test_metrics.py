"""/metrics after runs, read with prometheus_client's own parser of the text format: runs by
agent and status, runs executing, latency histograms, the run queue's depth, recoveries;
and who may read it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from runpoint.adapters import auth
from runpoint.adapters.litestar import build, create_app
from runpoint.adapters.metrics import Metrics
from runpoint.core.schedule import Schedule, ScheduleRun
from runpoint.core.types import RunStatus
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.seams.agent import Agent, tool
from runpoint.seams.host import PluginHost
from tests.kernel import crashing
from tests.kernel.test_recovery import until

from .conftest import bearer, write_keys
from .test_traces import broken

pytestmark = pytest.mark.memory  # storage is not the subject here, but where it says
ON_POSTGRES = pytest.mark.parametrize("database", ["postgresql"], indirect=True)
ON_SQLITE = pytest.mark.parametrize("database", ["sqlite"], indirect=True)


def parse(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Each sample of a scrape: (name, labels) -> value."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_a_scrape_after_runs_counts_them_and_their_latencies() -> None:
    async with AsyncTestClient(create_app([*agents, broken], database="memory:")) as client:
        for agent_id, message in [
            ("travel-agent", "Paris and Tokyo"),  # two tool batches, then the answer
            ("booking-agent", "Book Paris"),  # pauses for a person's confirmation
            ("broken", "Paris"),  # its model fails
        ]:
            data = {"message": message, "stream": "false"}
            answer = await client.post(f"/agents/{agent_id}/runs", data=data)
            assert answer.status_code == 200
            if agent_id == "travel-agent":
                counted = answer.json()["metrics"]
        scrape = await client.get("/metrics")
    assert scrape.status_code == 200
    assert scrape.headers["content-type"].startswith("text/plain; version=")
    samples = parse(scrape.text)

    def finished(agent_id: str, status: str) -> float | None:
        return value(samples, "runpoint_runs_finished_total", agent_id=agent_id, status=status)

    assert finished("travel-agent", "COMPLETED") == 1
    assert finished("booking-agent", "PAUSED") == 1
    assert finished("broken", "ERROR") == 1
    assert finished("travel-agent", "ERROR") is None
    for agent_id in ("travel-agent", "booking-agent", "broken", "checkpoint-agent"):
        assert value(samples, "runpoint_runs_active", agent_id=agent_id) == 0
    travel, provider = {"agent_id": "travel-agent"}, {"provider": "scripted"}
    assert value(samples, "runpoint_model_call_seconds_count", **travel, **provider) == 3
    assert value(samples, "runpoint_model_call_seconds_count", agent_id="broken", **provider) == 1
    for kind in ("input", "output", "cache_read", "cache_write"):  # as the run counted them
        tokens = value(samples, "runpoint_model_tokens_total", **travel, **provider, kind=kind)
        assert tokens == counted[f"{kind}_tokens"]
    assert counted["input_tokens"] > 0
    tool = {"tool": "get_population"}
    assert value(samples, "runpoint_tool_call_seconds_count", **travel, **tool) == 2
    # the booking was not made: nobody confirmed it
    booking = {"agent_id": "booking-agent", "tool": "book_trip"}
    assert value(samples, "runpoint_tool_call_seconds_count", **booking) is None
    assert value(samples, "runpoint_checkpoint_write_seconds_count", **travel) == 3
    written = value(samples, "runpoint_checkpoint_write_seconds_sum", **travel)
    assert written is not None and 0 < written < 3
    inf = value(samples, "runpoint_checkpoint_write_seconds_bucket", **travel, le="+Inf")
    assert inf == 3
    assert not [s for s in samples if s[0] == "runpoint_queue_depth"]  # no queue on memory:
    assert value(samples, "process_resident_memory_bytes")  # and the process's own


gate = asyncio.Event()


@tool
async def wait_for_gate(city: str) -> str:
    """Wait until the test lets the call finish.

    Args:
        city: A city.
    """
    await gate.wait()
    return city


async def test_a_run_under_way_is_active_until_it_stops() -> None:
    waiting = Agent(id="waiting", model="scripted:demo", tools=[wait_for_gate])
    gate.clear()
    rp = Runpoint([waiting], database="memory:", host=PluginHost([Metrics()]))
    async with AsyncTestClient(build(rp)) as client:
        handle = await rp.create_run(
            CreateRun(agent_id="waiting", message="Paris", background=True)
        )
        async with asyncio.timeout(10):
            while not rp.executing():  # noqa: ASYNC110 (the run starts in its own task)
                await asyncio.sleep(0.01)
        during = parse((await client.get("/metrics")).text)
        gate.set()
        await handle.result()
        after = parse((await client.get("/metrics")).text)
    assert value(during, "runpoint_runs_active", agent_id="waiting") == 1
    assert value(after, "runpoint_runs_active", agent_id="waiting") == 0
    completed = {"agent_id": "waiting", "status": "COMPLETED"}
    assert value(during, "runpoint_runs_finished_total", **completed) is None
    assert value(after, "runpoint_runs_finished_total", **completed) == 1


async def test_metrics_want_credentials_as_every_operation_does(tmp_path: Path) -> None:
    keys = auth.load(api_keys_file=str(write_keys(tmp_path / "keys.yaml")))
    async with AsyncTestClient(create_app(agents, database="memory:", auth=keys)) as client:
        assert (await client.get("/metrics")).status_code == 401
        scrape = await client.get("/metrics", headers=bearer("alpha-reader-key"))
    assert scrape.status_code == 200 and "runpoint_runs_active" in scrape.text


async def test_a_server_that_keeps_no_metrics_says_so() -> None:
    rp = Runpoint(agents, database="memory:", host=PluginHost())
    async with AsyncTestClient(build(rp)) as client:
        answer = await client.get("/metrics")
    assert answer.status_code == 501
    assert answer.json()["error_code"] == "METRICS_UNAVAILABLE"
    assert "pip install 'runpoint[otel]'" in answer.json()["detail"]


@ON_POSTGRES
async def test_the_queue_depth_is_the_runs_no_process_took_yet(database: str) -> None:
    metrics = Metrics()
    host = PluginHost([metrics])
    async with Runpoint(agents, database=database, host=host, execute_queued=False) as rp:
        for city in ("Paris", "Tokyo"):
            await rp.create_run(CreateRun(agent_id="travel-agent", message=city, background=True))
        samples = parse((await metrics.scrape(rp))[0].decode())
    assert value(samples, "runpoint_queue_depth", agent_id="travel-agent") == 2
    assert value(samples, "runpoint_queue_depth", agent_id="booking-agent") == 0


@ON_SQLITE
async def test_a_run_resumed_after_its_process_died_is_a_recovery(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COUNTER", str(tmp_path / "calls.txt"))
    run_id = await crashing.kill(database, tmp_path / "calls.txt")
    metrics = Metrics()
    host = PluginHost([metrics])
    finished = {"agent_id": "counter", "status": "COMPLETED"}
    async with Runpoint([crashing.agent], database=database, lease_seconds=0.5, host=host) as rp:
        await until(rp, run_id, RunStatus.COMPLETED)
        # plugins are told after the run's last save, which `until` may see first
        async with asyncio.timeout(10):
            while True:
                samples = parse((await metrics.scrape(rp))[0].decode())
                if value(samples, "runpoint_runs_finished_total", **finished) is not None:
                    break
                await asyncio.sleep(0.01)
    assert value(samples, "runpoint_run_recoveries_total", agent_id="counter") == 1
    assert value(samples, "runpoint_runs_finished_total", **finished) == 1


def test_a_schedule_fired_late_in_a_busy_minute_is_told_apart_from_one_on_time() -> None:
    metrics = Metrics()
    schedule = Schedule(schedule_id="s", name="n", agent_id="travel-agent", message="Paris")
    for delay in (0.2, 20.0):  # on time; behind a minute of a thousand ticks
        fired = ScheduleRun(schedule_id="s", tick=0.0, run_id=str(delay), session_id="x")
        metrics.runpoint_schedule_fired(schedule, fired, delay)
    samples = parse(generate_latest(metrics.instruments.registry).decode())
    under = {
        le: value(samples, "runpoint_schedule_fire_delay_seconds_bucket", le=le)
        for le in ("0.25", "10.0", "30.0")
    }
    assert under == {"0.25": 1, "10.0": 1, "30.0": 2}
