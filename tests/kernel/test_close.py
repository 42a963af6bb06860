"""A close stops what this process does in the background, and returns, also when a task it
cancels was in the middle of a write: the cancel ends the task, whatever error the task's
way out raised (runpoint.core.cancels). A SQLite write interrupted so raises the cancel, and
the writes that shared its transaction fail as an outage, retried."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, text

from runpoint.core.errors import Unavailable
from runpoint.core.types import Lease, RunStatus
from runpoint.durable.leases import Leases
from runpoint.durable.periodic import Periodic
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.plugins.memory import MemoryStorage
from runpoint.plugins.scripted import ScriptedModel
from runpoint.plugins.sql.sqlite import Sqlite
from runpoint.plugins.sql.store import SqlStorage
from runpoint.seams.agent import Agent
from runpoint.seams.model import ModelRequest, ModelResponse

WAIT = 10.0  # seconds a step may take on a loaded machine; a hang fails, it is not waited out


async def returns(task: asyncio.Task[Any]) -> None:
    """Fail if `task` (a stop) has not returned within WAIT. Not wait_for: its cancel at the
    timeout would reach the loop the stop waits for, and end it."""
    done, _ = await asyncio.wait({task}, timeout=WAIT)
    assert task in done, "it waits for ever"
    task.result()


class Gate:
    """Holds the next statement on a SQLite connection, in its thread, that contains
    `armed` (SQLite's trace callback, on every connection of an engine) until released."""

    def __init__(self, engine: Any) -> None:
        self.armed: str | None = None
        self.entered, self.released = threading.Event(), threading.Event()

        def traced(sql: str) -> None:
            if self.armed is not None and self.armed in sql:
                self.armed = None
                self.entered.set()
                self.released.wait(WAIT)

        def connected(connection: Any, _: object) -> None:
            connection.run_async(lambda aio: aio.set_trace_callback(traced))

        event.listen(engine.sync_engine, "connect", connected)

    async def holding(self, statement: str) -> None:
        """Once a statement containing `statement` is under way, held."""
        self.armed = statement
        assert await asyncio.to_thread(self.entered.wait, WAIT), "no such statement came"


@pytest.fixture
async def storage(database: str) -> AsyncIterator[tuple[SqlStorage, Gate]]:
    opened = SqlStorage(database)
    gate = Gate(opened.engine)
    await opened.open()
    yield opened, gate
    gate.released.set()
    await opened.close()


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_a_sqlite_write_interrupted_raises_the_cancel_and_its_group_an_outage(
    storage: tuple[SqlStorage, Gate],
) -> None:
    store, gate = storage
    db = store.db
    assert isinstance(db, Sqlite)
    inside, go_on = asyncio.Event(), asyncio.Event()

    async def first() -> None:  # holds the group open until the second joins it
        async with db.single_write() as conn:
            inside.set()
            await go_on.wait()
            await conn.exec_driver_sql("INSERT INTO secrets (name, value) VALUES ('a', x'00')")

    async def second() -> None:
        async with db.single_write() as conn:
            await conn.exec_driver_sql("INSERT INTO secrets (name, value) VALUES ('b', x'00')")

    written = asyncio.create_task(first())
    await inside.wait()
    interrupted = asyncio.create_task(second())
    await asyncio.sleep(0.01)  # waiting for its turn in the group
    go_on.set()
    await gate.holding("'b'")
    interrupted.cancel()
    gate.released.set()
    with pytest.raises(asyncio.CancelledError):  # not the error of a rollback on the way out
        await asyncio.wait_for(interrupted, WAIT)
    # the first's insert went with the transaction the interrupted statement's connection took
    # back: an outage, which a run's writer retries
    with pytest.raises(Unavailable):
        await asyncio.wait_for(written, WAIT)
    async with db.write() as conn:  # the writer is free again, and nothing of either stands
        assert await conn.scalar(text("SELECT count(*) FROM secrets WHERE name IN ('a', 'b')")) == 0


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_close_returns_while_a_schedule_pass_writes(database: str) -> None:
    """The schedule loop writes every `schedule_seconds`: a close that cancels it in the
    middle of a statement returns (it waited for ever: the cancel surfaced as the error of a
    rollback on the way out, which the loop logged and went on from)."""
    rp = Runpoint(agents, database=database, schedule_seconds=0.01)
    assert isinstance(rp.storage, SqlStorage)
    gate = Gate(rp.storage.engine)
    await rp.open()
    try:
        await gate.holding("UPDATE schedules")  # a pass claims the due schedules
        closing = asyncio.create_task(rp.close())
        await asyncio.sleep(0)  # the close has cancelled the pass, held in its statement
        assert rp.scheduler._task is not None and rp.scheduler._task.cancelling()
    finally:
        gate.released.set()
    await returns(closing)


class Hung(Periodic):
    """A pass whose way out, when it is cancelled, fails with an error of its own (the
    first pass only: a test that fails can end it)."""

    every, name, log = 0.001, "hung pass", logging.getLogger("test")

    def __init__(self) -> None:
        self.began = asyncio.Event()

    async def once(self) -> None:
        if self.began.is_set():
            return
        self.began.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise RuntimeError("the cleanup failed") from None


async def test_a_stop_ends_a_pass_whose_cancel_surfaced_as_an_error() -> None:
    hung = Hung()
    hung.start()
    await hung.began.wait()
    await returns(asyncio.create_task(hung.stop()))


class Slow(Periodic):
    """A pass whose way out, when it is cancelled, takes until `done` is set."""

    every, name, log = 0.001, "slow pass", logging.getLogger("test")

    def __init__(self) -> None:
        self.began, self.leaving, self.done = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def once(self) -> None:
        self.began.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.leaving.set()
            await self.done.wait()


async def test_a_cancel_of_the_caller_of_stop_is_not_swallowed() -> None:
    slow = Slow()
    slow.start()
    await slow.began.wait()
    stopping = asyncio.create_task(slow.stop())
    await slow.leaving.wait()  # the stop waits for the pass's way out
    stopping.cancel()  # as a close cancelled in turn would be
    slow.done.set()
    await asyncio.wait({stopping}, timeout=WAIT)
    assert stopping.cancelled()
    await returns(asyncio.create_task(slow.stop()))  # a stop again ends it


async def test_a_cancel_of_a_block_under_a_renewed_lease_is_not_swallowed() -> None:
    """A block whose lease is renewed, cancelled while it waits for the heartbeat's way
    out (a renewal in flight), ends cancelled, not as if it had returned."""
    leaving, done = asyncio.Event(), asyncio.Event()

    async def renew(lease: Lease) -> None:
        try:
            await asyncio.Event().wait()
        finally:  # the heartbeat's way out, held
            leaving.set()
            await done.wait()

    renewing = asyncio.Event()
    leases = Leases(MemoryStorage(), lease_seconds=0.03, max_recoveries=1)

    async def block() -> None:
        async with leases.renewing("owner", renew):
            renewing.set()
            await asyncio.sleep(0.05)  # a renewal begins meanwhile

    blocked = asyncio.create_task(block())
    await leaving.wait()  # the block has ended and waits for the heartbeat to stop
    blocked.cancel()
    done.set()
    await asyncio.wait({blocked}, timeout=WAIT)
    assert renewing.is_set() and blocked.cancelled()


@pytest.mark.memory
async def test_a_run_whose_cancel_surfaced_as_an_error_is_left_to_recovery(
    database: str,
) -> None:
    """A close cancels the runs executing here: one whose model call turned the cancel into
    an error (an SDK closing its connection) is not ended ERROR, but left RUNNING under its
    lease, for the lease watch of a process to resume, as any run of a closed process."""
    calling = asyncio.Event()

    async def turn(request: ModelRequest) -> ModelResponse:
        calling.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ConnectionError("the model's connection closed") from None
        raise AssertionError("never answered")

    agent = Agent(id="waits", model=ScriptedModel(turn))
    rp = await Runpoint([agent], database=database).open()
    handle = await rp.create_run(CreateRun(agent_id="waits", message="hello", background=True))
    await asyncio.wait_for(calling.wait(), WAIT)
    await returns(asyncio.create_task(rp.close()))
    stored = await rp.storage.get_run(handle.run.run_id)
    assert stored is not None and stored.status is RunStatus.RUNNING
