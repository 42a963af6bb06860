"""Concurrency that holds across processes: each Runpoint here has its own engine, as a
separate server process would, on the one database."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from runpoint.core.errors import Conflict
from runpoint.core.types import Decision, RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import agents as demo_agents
from runpoint.seams.agent import Agent, tool

# An asyncio.Event belongs to the event loop it is first awaited on: one per test.
gates: dict[str, asyncio.Event] = {}


async def wait_for_gate(city: str) -> str:
    """A tool that holds its run in flight until the test opens the gate."""
    await gates["gate"].wait()
    return "open"


@tool(requires_confirmation=True)
async def book_at_the_gate(city: str) -> str:
    """A booking a person confirms, held in flight until the test opens the gate."""
    await gates["gate"].wait()
    return f"Booked {city}."


slow = Agent(id="slow", model="scripted:demo", tools=[wait_for_gate])
gated_booking = Agent(id="gated-booking", model="scripted:demo", tools=[book_at_the_gate])
AGENTS = [slow, gated_booking, *demo_agents]
Open = Callable[..., Awaitable[Runpoint]]


@pytest.fixture
async def servers(database: str) -> AsyncIterator[Open]:
    gates["gate"] = asyncio.Event()
    opened: list[Runpoint] = []

    async def open_(**options: object) -> Runpoint:
        runpoint = await Runpoint(AGENTS, database=database, **options).open()  # type: ignore[arg-type]
        opened.append(runpoint)
        return runpoint

    yield open_
    gates["gate"].set()
    for runpoint in opened:
        await runpoint.close()


async def test_a_new_run_in_a_busy_session_is_a_conflict_everywhere(servers: Open) -> None:
    a, b = await servers(), await servers()
    busy = await a.create_run(CreateRun(agent_id="slow", message="Paris"))
    session = busy.run.session_id
    for server in (a, b):
        with pytest.raises(Conflict, match=f"run {busy.run.run_id} of session {session}"):
            await server.create_run(CreateRun(agent_id="slow", message="Tokyo", session_id=session))
    gates["gate"].set()
    assert (await busy.result()).status is RunStatus.COMPLETED
    after = await (
        await b.create_run(CreateRun(agent_id="slow", message="Tokyo", session_id=session))
    ).result()
    assert after.previous_run_id == busy.run.run_id


async def test_a_new_run_in_a_busy_session_can_wait_its_turn(servers: Open) -> None:
    a, b = await servers(), await servers(busy_session="wait", busy_timeout=10)
    busy = await a.create_run(CreateRun(agent_id="slow", message="Paris"))
    waiting = asyncio.create_task(
        b.create_run(CreateRun(agent_id="slow", message="Tokyo", session_id=busy.run.session_id))
    )
    await asyncio.sleep(0.3)
    assert not waiting.done()
    gates["gate"].set()
    second = await (await waiting).result()
    assert second.previous_run_id == busy.run.run_id
    assert (await busy.result()).status is RunStatus.COMPLETED


async def test_runs_racing_to_start_one_new_session_queue_up_in_it(servers: Open) -> None:
    """The session is new to all of them: one creates it with its run, the others join it
    (waiting their turn here) rather than failing on the duplicate session."""
    a, b = await servers(busy_session="wait"), await servers(busy_session="wait")
    starting = [
        server.create_run(CreateRun(agent_id="slow", message=city, session_id="shared"))
        for server, city in ((a, "Paris"), (b, "Tokyo"), (a, "Lagos"))
    ]
    await asyncio.sleep(0.1)
    gates["gate"].set()
    finished = [await (await handle).result() for handle in asyncio.as_completed(starting)]
    assert [r.status for r in finished] == [RunStatus.COMPLETED] * 3
    chain = await a.list_runs("shared")
    assert [r.previous_run_id for r in chain] == [None, chain[0].run_id, chain[1].run_id]


async def test_concurrent_continues_of_one_run_all_fork(servers: Open) -> None:
    a, b = await servers(), await servers()
    source = await (
        await a.create_run(CreateRun(agent_id="travel-agent", message="Paris, Tokyo and Lagos"))
    ).result()
    handles = await asyncio.gather(
        *[
            server.continue_run(
                ContinueRun(run_id=source.run_id, continue_from=3, input=f"Only {city}")
            )
            for server, city in zip((a, b, a, b), ("Lima", "Kyoto", "Cairo", "Sydney"), strict=True)
        ]
    )
    forks = [await h.result() for h in handles]
    assert len({f.run_id for f in forks}) == 4
    assert all(
        f.forked_from_run_id == source.run_id and f.status is RunStatus.COMPLETED for f in forks
    )
    for fork, city in zip(forks, ("Lima", "Kyoto", "Cairo", "Sydney"), strict=True):
        messages = (await a.get_run(fork.run_id)).messages
        assert messages[3].content == f"Only {city}"  # nothing interleaved
        assert [m.tool_args for m in messages[4:] if m.role == "tool"] == [{"city": city}]


async def test_the_losers_of_a_race_to_resume_a_paused_run_get_a_conflict(
    servers: Open,
) -> None:
    a, b = await servers(), await servers()
    paused = await (
        await a.create_run(CreateRun(agent_id="gated-booking", message="Book Paris"))
    ).result()
    [call] = [t for t in (await a.get_run(paused.run_id)).tools if t.result is None]
    decisions: dict[str, Decision] = {call.tool_call_id: True}
    outcomes = await asyncio.gather(
        *(
            rp.continue_run(ContinueRun(run_id=paused.run_id, tools=decisions))
            for rp in (a, b, a, b)
        ),
        return_exceptions=True,
    )
    [winner] = [o for o in outcomes if not isinstance(o, BaseException)]
    assert all(isinstance(o, Conflict) for o in outcomes if o is not winner), outcomes
    for late in (a, b):  # after the winner's write, while its run goes: a conflict too
        with pytest.raises(Conflict, match="in flight"):
            await late.continue_run(ContinueRun(run_id=paused.run_id, tools=decisions))
    gates["gate"].set()
    run = await winner.result()
    assert run.status is RunStatus.COMPLETED
    [tool] = (await b.get_run(run.run_id)).tools
    assert tool.result == "Booked Paris."  # run once


async def test_a_stale_writer_cannot_write(servers: Open) -> None:
    a = await servers()
    run = await (await a.create_run(CreateRun(agent_id="travel-agent", message="Paris"))).result()
    first, second = await a.storage.get_run(run.run_id), await a.storage.get_run(run.run_id)
    assert first is not None and second is not None
    await a.storage.save(first, [], None)
    with pytest.raises(Conflict, match="changed by another writer"):
        await a.storage.save(second, [], None, intents=["call_stale"])
    # nothing of its boundary was written: not the calls it was about to start either
    assert await a.storage.tool_records(run.run_id, ["call_stale"]) == {}
