"""A fork (of a session, from a session checkpoint, of a run, with edits, a fan-out) or a
continue made while retention removes what it starts from: the new run reads its
source's rows intact, or it is refused (404, 409); never a run reading rows that went.

The sweep is made to land where it hurts: after the command read its source, right
before its write."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from runpoint.core.errors import Conflict, NotFound
from runpoint.core.types import Run
from runpoint.facade import Branch, ContinueRun, CreateRun, FanOut, ForkSession, Runpoint
from runpoint.plugins.demo import agents
from runpoint.runs.edits import ReplaceToolResult
from runpoint.seams.retention import Retention
from tests.kernel.test_retention import stored

EVERY = pytest.mark.parametrize("database", ["memory", "sqlite", "postgresql"], indirect=True)
SQL = pytest.mark.parametrize("database", ["sqlite", "postgresql"], indirect=True)
WRITES = ("create_sessions", "create_runs", "start_in_session")


@pytest.fixture
async def rp(database: str) -> AsyncIterator[Runpoint]:
    runpoint = await Runpoint(agents, database=database, retention=Retention(runs=0)).open()
    yield runpoint
    await runpoint.close()


@contextlib.contextmanager
def swept_before_writes(rp: Runpoint, calls: tuple[str, ...] = WRITES) -> Any:
    """Every new session or run the commands write (or each of `calls` to the storage) is
    preceded by a whole sweep."""
    storage = rp.storage
    originals = {name: getattr(storage, name) for name in calls}

    def sweeping_first(write: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        async def written(*args: Any, **kwargs: Any) -> Any:
            await rp.sweeper.sweep_all()
            return await write(*args, **kwargs)

        return written

    for name, write in originals.items():
        setattr(storage, name, sweeping_first(write))
    try:
        yield
    finally:
        for name in calls:
            delattr(storage, name)


async def finished(rp: Runpoint, message: str = "Paris, Tokyo and Lagos") -> Run:
    made = await rp.create_run(CreateRun(agent_id="travel-agent", message=message))
    return await made.result()


async def whole(rp: Runpoint, run_id: str) -> bytes:
    """A run's messages, its timeline and its snapshot at each checkpoint, encoded; each
    read failing if a row it needs went."""
    detail = await rp.get_run(run_id)
    assert len(detail.messages) == detail.run.message_count, "messages went"
    _, timeline = await rp.timeline(run_id)
    snapshots = [await rp.snapshot(run_id, c.message_index) for c in timeline]
    for snapshot in snapshots:
        assert snapshot.checkpoint is not None, "a checkpoint went"
    return msgspec.json.encode([detail.messages, [s.detail.messages for s in snapshots]])


@EVERY
async def test_a_session_fork_of_a_session_swept_meanwhile_is_not_found(rp: Runpoint) -> None:
    source = await finished(rp)
    with swept_before_writes(rp), pytest.raises(NotFound):
        await rp.fork_session(ForkSession(session_id=source.session_id))
    assert await rp.list_sessions() == []
    assert await stored(rp) == 0, "no run was born reading rows that went"


@EVERY
@pytest.mark.parametrize("read", ["get_session", "list_runs"])
async def test_a_session_fork_of_a_session_swept_between_its_reads_is_not_found(
    rp: Runpoint, read: str
) -> None:
    source = await finished(rp)
    with swept_before_writes(rp, (read,)), pytest.raises(NotFound):
        await rp.fork_session(ForkSession(session_id=source.session_id))
    assert await rp.list_sessions() == [], "not an empty fork"
    assert await stored(rp) == 0


@EVERY
async def test_a_fork_from_a_session_checkpoint_swept_meanwhile(rp: Runpoint) -> None:
    source = await finished(rp)
    with swept_before_writes(rp), pytest.raises(NotFound):
        await rp.session_checkpoints.fork(source.session_id)
    assert await rp.list_sessions() == []
    assert await stored(rp) == 0


@EVERY
@pytest.mark.parametrize("how", ["fork", "edit", "fan-out", "continue"])
async def test_a_run_from_a_run_swept_meanwhile_is_not_found(rp: Runpoint, how: str) -> None:
    source = await finished(rp)
    paris = (await rp.get_run(source.run_id)).tools[0]
    start: dict[str, Callable[[], Awaitable[object]]] = {
        "fork": lambda: rp.continue_run(
            ContinueRun(run_id=source.run_id, continue_from=3, input="P")
        ),
        "edit": lambda: rp.continue_run(
            ContinueRun(
                run_id=source.run_id,
                continue_from=3,
                edits=[ReplaceToolResult(paris.tool_call_id, "99M")],
            )
        ),
        "fan-out": lambda: rp.fan_out(
            FanOut(
                run_id=source.run_id,
                continue_from=3,
                branches=[Branch(input="A"), Branch(input="B")],
            )
        ),
        "continue": lambda: rp.continue_run(ContinueRun(run_id=source.run_id, input="And Rome?")),
    }
    with swept_before_writes(rp), pytest.raises(NotFound):
        await start[how]()
    assert await rp.list_sessions() == []
    assert await stored(rp) == 0


AGE = 1.0  # seconds: the sources are older, the forks younger, when the sweeps come


async def forks_of(rp: Runpoint, source: Run) -> list[list[str] | None]:
    """A session fork and a run fork of `source`: each its runs, or None if refused."""

    async def session_fork() -> list[str]:
        fork = await rp.fork_session(ForkSession(session_id=source.session_id))
        return [r.run_id for r in await rp.list_runs(fork.session_id)]

    async def run_fork() -> list[str]:
        again = ContinueRun(run_id=source.run_id, continue_from=3, input="Paris")
        return [(await (await rp.continue_run(again)).result()).run_id]

    made: list[list[str] | None] = []
    for outcome in await asyncio.gather(session_fork(), run_fork(), return_exceptions=True):
        if isinstance(outcome, NotFound | Conflict):
            made.append(None)
        elif isinstance(outcome, BaseException):
            raise outcome
        else:
            made.append(outcome)
    return made


async def made_while_swept(rp: Runpoint, sweep: Callable[[], Awaitable[object]]) -> list[bool]:
    """Rounds of sources made, aged, then forked while `sweep` goes: every fork reads
    its source's rows as they were (a session fork byte for byte), or was refused.
    Whether each fork was made."""
    made = []
    for round in range(4):
        sources = [await finished(rp) for _ in range(3)]
        expected = [await whole(rp, s.run_id) for s in sources]
        await asyncio.sleep(AGE * (0.85 + 0.1 * round))  # forks before and after they age
        forks = asyncio.gather(*(forks_of(rp, s) for s in sources))
        found, _ = await asyncio.gather(forks, sweep())
        for before, (session_fork, run_fork) in zip(expected, found, strict=True):
            if session_fork is not None:
                [copy] = session_fork
                assert await whole(rp, copy) == before, "a session fork, byte for byte"
            if run_fork is not None:
                await whole(rp, run_fork[0])
            made += [session_fork is not None, run_fork is not None]
    return made


@SQL
async def test_forks_made_while_another_runpoint_sweeps(database: str) -> None:
    policy = Retention(runs=AGE)
    async with (
        Runpoint(agents, database=database) as rp,
        Runpoint(agents, database=database, retention=policy) as sweeping,
    ):
        assert len(await made_while_swept(rp, sweeping.sweeper.sweep_all)) == 24


@SQL
async def test_forks_made_while_another_process_sweeps(database: str) -> None:
    async with Runpoint(agents, database=database) as rp:  # migrated before the other opens
        child = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "tests.kernel.sweeping", database, str(AGE)),
            cwd=Path(__file__).parents[2],
        )
        try:
            made = await made_while_swept(rp, lambda: asyncio.sleep(0.2))
        finally:
            child.kill()
            await child.wait()
    assert len(made) == 24
