"""Processes that die or stall around packing (plugins/sql/packing.py): a long run killed
with SIGKILL as a window is to be packed, or inside the packing's transaction, resumes in
another process and reads back as an uninterrupted run does, the window it left as rows
packed at the run's end; a stale process whose run
another took over packs after its last save without harm to the new owner's rows; and one
stalled inside its packing holds up no other process's run."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from sqlalchemy import make_url

from runpoint import hookimpl
from runpoint.core.messages import Message
from runpoint.core.types import Run, RunEvent, RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.sql import packing
from runpoint.plugins.sql.packs import WINDOW
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost
from tests.kernel import crashing_packs
from tests.kernel.crashing_session import frozen, kill_frozen
from tests.long_runs import AGENT, PAUSING, packed

pytestmark = pytest.mark.usefixtures("database")
COUNT = 2 + 2 * crashing_packs.TURNS
PAUSED_AT = 2 + 2 * crashing_packs.PAUSE_AT
# a run's messages as stored, every window packed: [128, 162), half full, as the run ended
PACKED = [(0, WINDOW), (WINDOW, WINDOW), (2 * WINDOW, COUNT - 2 * WINDOW)]


def transcript(messages: list[Message]) -> list[Message]:
    """`messages` without what differs between two runs of one script (ids, times)."""
    return [msgspec.structs.replace(m, id="", created_at=0) for m in messages]


def stream(events: list[RunEvent]) -> list[tuple[Any, ...]]:
    """What `events` say, a resume's RunContinued left out."""
    return [
        (e.event, e.data.get("content"), e.data.get("tool_call_id"), e.data.get("message_index"))
        for e in events
        if e.event != "RunContinued"
    ]


class Read(msgspec.Struct):
    """All a run reads back as."""

    messages: list[Message]
    timeline: list[tuple[int, str]]
    events: list[tuple[Any, ...]]


async def read(rp: Runpoint, run: Run) -> Read:
    detail = await rp.get_run(run.run_id)
    timeline = (await rp.timeline(run.run_id))[1]
    events = await rp.storage.read_events(run, 0, 10_000)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return Read(
        transcript(detail.messages),
        [(c.message_index, c.reason) for c in timeline],
        stream(events),
    )


async def started(rp: Runpoint, agent: Agent = AGENT) -> Run:
    """A run of `agent`'s script, until it ends or pauses."""
    said = crashing_packs.SAID[agent.id]
    return await (await rp.create_run(CreateRun(agent_id=agent.id, message=said))).result()


async def uninterrupted(rp: Runpoint) -> Read:
    """The same script, run from start to end in this process."""
    run = await started(rp)
    assert run.status is RunStatus.COMPLETED and run.message_count == COUNT
    return await read(rp, run)


def whole(got: Read, expected: Read) -> None:
    assert got.messages == expected.messages
    assert got.timeline == expected.timeline
    assert len(got.timeline) == len(set(got.timeline)) == crashing_packs.TURNS + 1
    assert got.events == expected.events


class Ended:
    """A plugin told of each run's end, which is after its last save and its packing (a
    poll of the run's status may see the save first)."""

    def __init__(self) -> None:
        self.host = PluginHost([self])
        self.ended: set[str] = set()

    @hookimpl
    def runpoint_run_finished(self, run: Run) -> None:
        self.ended.add(run.run_id)

    async def run(self, rp: Runpoint, run_id: str) -> Run:
        """The run once it ended, COMPLETED."""
        async with asyncio.timeout(30):
            while run_id not in self.ended:  # noqa: ASYNC110 (the hook is the plugin's own)
                await asyncio.sleep(0.02)
        run = (await rp.get_run(run_id)).run
        assert run.status is RunStatus.COMPLETED, run.error
        return run


@pytest.mark.parametrize("where", ["before", "during"])
async def test_a_run_killed_around_its_packing_resumes_and_reads_back_whole(
    database: str, where: str
) -> None:
    [run_id] = await kill_frozen("tests.kernel.crashing_packs", database, where)
    # the window the kill interrupted the packing of is left a row a message
    assert await packed(database, "messages", run_id) == [(i, 1) for i in range(WINDOW + 1)]
    ended = Ended()
    async with Runpoint([AGENT], database=database, lease_seconds=0.5, host=ended.host) as rp:
        run = await ended.run(rp, run_id)  # the lease watch resumes it
        assert run.recoveries == 1 and run.message_count == COUNT
    async with Runpoint([AGENT], database=database) as rp:  # nothing kept
        whole(await read(rp, run), await uninterrupted(rp))
        # the later windows were packed as the run went, the interrupted one at its end
        assert await packed(database, "messages", run_id) == PACKED
        expected = (await rp.get_run(run_id)).messages
        for at in (31, WINDOW + 33):  # in the window packed at the end, and in another
            go_on = ContinueRun(run_id=run_id, continue_from=at, fork=True)
            fork = await (await rp.continue_run(go_on)).result()
            assert fork.run_id != run_id and fork.status is RunStatus.COMPLETED
            assert transcript((await rp.get_run(fork.run_id)).messages) == transcript(expected)


class Held:
    """A `crashing_packs` process held where it stopped (`held-...`), its run's id."""

    def __init__(self, child: asyncio.subprocess.Process, run_id: str) -> None:
        self.child, self.run_id = child, run_id

    async def go_on(self) -> None:
        """Let it go on, as SIGCONT would, until it packed and ended."""
        assert self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.write(b"go on\n")
        async with asyncio.timeout(30):
            assert (await self.child.stdout.readline()).split() == [b"packed"]
            await self.child.wait()


@contextlib.asynccontextmanager
async def held(database: str, *args: str) -> AsyncIterator[Held]:
    child, [run_id] = await frozen("tests.kernel.crashing_packs", database, *args)
    try:
        yield Held(child, run_id)
    finally:
        if child.returncode is None:
            child.kill()
            await child.wait()


@pytest.mark.parametrize("where", ["before", "during"])
async def test_a_stale_process_packs_after_its_run_was_taken_over_without_harm(
    database: str, where: str
) -> None:
    if where == "during" and database.startswith("sqlite"):
        pytest.skip("a stalled SQLite writer holds the one write lock: nobody else writes")
    ended = Ended()
    async with (
        held(database, f"held-{where}") as stale,
        Runpoint([AGENT], database=database, lease_seconds=0.5, host=ended.host) as rp,
    ):
        run = await ended.run(rp, stale.run_id)  # taken over, and ended
        assert run.recoveries == 1
        await stale.go_on()  # it packs, then finds it lost its run
    run_id = run.run_id
    async with Runpoint([AGENT], database=database) as rp:
        got = await read(rp, run)
        whole(got, await uninterrupted(rp))
        assert (await rp.get_run(run_id)).run.status is RunStatus.COMPLETED
    # every window packed: the stale process's the first
    assert await packed(database, "messages", run_id) == PACKED


async def confirmed(rp: Runpoint, paused: Run) -> Run:
    """`paused` (a run of PAUSING) resumed with its call confirmed, to its end."""
    assert paused.status is RunStatus.PAUSED and paused.message_count == PAUSED_AT
    [call] = [t.tool_call_id for t in (await rp.get_run(paused.run_id)).tools if t.result is None]
    go_on = ContinueRun(run_id=paused.run_id, tools={call: True})
    run = await (await rp.continue_run(go_on)).result()
    assert run.run_id == paused.run_id
    assert run.status is RunStatus.COMPLETED and run.message_count == COUNT
    return run


async def test_a_process_stalled_in_its_packing_holds_up_no_other_writer(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A process stopped (SIGSTOP, a network that drops packets) inside the packing of its
    paused run's last window holds the rows it took: another process that resumes the run
    and packs that window as it ends must not wait for it, and what both write reads back
    whole."""
    if database.startswith("sqlite"):
        pytest.skip("a stalled SQLite writer holds the one write lock: nobody else writes")
    caplog.set_level(logging.INFO, logger=packing.log.name)
    # statements that may wait longer than the test does: it is the packing that must not
    url = make_url(database).update_query_dict({"command_timeout": "600"})
    async with (
        held(database, "held-during", PAUSING.id, str(WINDOW)) as stale,
        Runpoint([PAUSING], database=url.render_as_string(False)) as rp,
    ):
        paused = (await rp.get_run(stale.run_id)).run
        async with asyncio.timeout(30):
            run = await confirmed(rp, paused)
        await stale.go_on()
    assert any("left unpacked" in r.getMessage() for r in caplog.records)
    async with Runpoint([PAUSING], database=database) as rp:
        got = await read(rp, run)
        whole(got, await read(rp, await confirmed(rp, await started(rp, PAUSING))))


async def test_a_run_killed_packing_the_window_it_paused_in_packs_it_when_resumed(
    database: str,
) -> None:
    """The last window of a paused run, half full, is packed after its last save; killed
    there, the window stays rows until the run, resumed in another process, completes it."""
    [run_id] = await kill_frozen(
        "tests.kernel.crashing_packs", database, "during", PAUSING.id, str(WINDOW)
    )
    assert (await packed(database, "messages", run_id))[1:] == [
        (i, 1) for i in range(WINDOW, PAUSED_AT)
    ]
    async with Runpoint([PAUSING], database=database) as rp:
        run = await confirmed(rp, (await rp.get_run(run_id)).run)
        whole(await read(rp, run), await read(rp, await confirmed(rp, await started(rp, PAUSING))))
    assert await packed(database, "messages", run_id) == PACKED
