"""Following a run's event log in one process: the followers of a run share one tail, and
whatever point each starts from, each gets the events past it, once, in order, then ends
when the run stops. (Across processes and databases: tests/http/test_streams.py.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import pytest

from runpoint.core.types import Run, RunEvent, RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import agents as demo_agents
from runpoint.plugins.memory import MemoryStorage
from runpoint.reads import streams
from runpoint.seams.agent import Agent, tool
from tests.conftest import OpenRunpoint

pytestmark = pytest.mark.memory  # what every backend must store: the conformance suite's


async def events(rp: Runpoint, run_id: str, after: int = 0) -> list[RunEvent]:
    async with asyncio.timeout(10):
        return [e async for batch in await rp.follow(run_id, after=after) for e in batch]


@pytest.fixture
async def gated(open_runpoint: OpenRunpoint) -> tuple[Runpoint, asyncio.Event]:
    """A runpoint whose runs wait in their first tool call until the test opens the gate."""
    gate = asyncio.Event()

    @tool(effect="read")
    async def get_population(city: str) -> str:
        """Waits for the gate."""
        await gate.wait()
        return "2.1M"

    agent = Agent(id="gated", model="scripted:demo", tools=[get_population])
    return await open_runpoint([agent]), gate


async def test_followers_from_any_point_get_what_is_past_it(
    gated: tuple[Runpoint, asyncio.Event],
) -> None:
    rp, gate = gated
    handle = await rp.create_run(CreateRun(agent_id="gated", message="Paris"), stream=True)
    # joined while the run waits: first from an id no event has yet (a client made it up),
    # which makes the run's tail, then from the start, then the request's own stream
    ahead = asyncio.create_task(events(rp, handle.run.run_id, after=10_000))
    await asyncio.sleep(0.1)
    everything = asyncio.create_task(events(rp, handle.run.run_id))
    mine = asyncio.create_task(collect(handle.events()))
    await asyncio.sleep(0.1)
    gate.set()
    whole = await everything
    assert [e.seq for e in whole] == list(range(1, len(whole) + 1))
    assert whole[-1].event == "RunCompleted"
    assert await mine == whole  # the stream of the request that started it
    assert await ahead == []
    middle = whole[len(whole) // 2].seq
    assert await events(rp, handle.run.run_id, after=middle) == whole[middle:]


async def test_a_follower_behind_what_the_tail_keeps_reads_the_log(
    gated: tuple[Runpoint, asyncio.Event], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(streams, "KEPT", 2)
    monkeypatch.setattr(streams, "PAGE", 3)
    rp, gate = gated
    handle = await rp.create_run(
        CreateRun(agent_id="gated", message="Paris Tokyo Lagos"), stream=True
    )
    first = asyncio.create_task(collect(handle.events()))
    await asyncio.sleep(0.1)
    gate.set()
    whole = await first
    again = await events(rp, handle.run.run_id)
    assert again == whole and [e.seq for e in whole] == list(range(1, len(whole) + 1))


async def collect(found: AsyncIterator[RunEvent]) -> list[RunEvent]:
    async with asyncio.timeout(10):
        return [e async for e in found]


class LogDown(MemoryStorage):
    """Its event log refuses every write between boundaries."""

    async def append_events(self, run: Run, events: Sequence[RunEvent]) -> bool:
        raise RuntimeError("the event log is down")


async def test_events_lost_between_boundaries_cost_the_run_nothing() -> None:
    async with Runpoint(demo_agents, storage=LogDown()) as rp:
        handle = await rp.create_run(
            CreateRun(agent_id="travel-agent", message="Paris"), stream=True
        )
        streamed = await collect(handle.events())
        run = await handle.result()
    assert run.status is RunStatus.COMPLETED
    # what boundaries wrote with them is there, in order: the checkpoints, the end
    names = [e.event for e in streamed]
    assert "CheckpointCreated" in names and names[-1] == "RunCompleted"
    assert [e.seq for e in streamed] == sorted({e.seq for e in streamed})


class Counted(MemoryStorage):
    """Counts the reads of an event log's end."""

    def __init__(self) -> None:
        super().__init__()
        self.ends_read = 0

    async def last_event_seq(self, run_id: str) -> int:
        self.ends_read += 1
        return await super().last_event_seq(run_id)


async def test_a_run_born_here_starts_its_log_without_reading_it() -> None:
    storage = Counted()
    async with Runpoint(demo_agents, storage=storage) as rp:
        first = await (
            await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))
        ).result()
        streamed = await rp.continue_run(
            ContinueRun(run_id=first.run_id, input="And Lima?"), stream=True
        )
        await collect(streamed.events())
        branch = await streamed.result()
        assert storage.ends_read == 0  # each is new: its log is empty
        for run in (first, branch):
            seqs = [e.seq for e in await events(rp, run.run_id)]
            assert seqs == list(range(1, len(seqs) + 1))
