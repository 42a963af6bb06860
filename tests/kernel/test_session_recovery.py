"""Session checkpoint operations survive the death of their process: a rollback whose
process was killed is completed by the next request that meets its lock, and a checkpoint
whose capture was cut short becomes FAILED."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

import pytest

from runpoint.core.errors import Conflict, Locked, NotContinuable
from runpoint.core.types import (
    Lease,
    Rollback,
    Run,
    SessionCheckpoint,
    SessionCheckpointStatus,
    now,
)
from runpoint.facade import ContinueRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost
from tests.directory_state import DirectoryState
from tests.kernel import crashing_session
from tests.kernel.test_context import Recorder, turn
from tests.kernel.test_session_checkpoints import checkpointed_between_two_runs, run

T = TypeVar("T")
LEASE_SECONDS = 0.5


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def rp(database: str, state: DirectoryState, recorder: Recorder) -> AsyncIterator[Runpoint]:
    agent = Agent(id=crashing_session.agent.id, model=ScriptedModel(recorder))
    host = PluginHost([state, crashing_session.Gate()])
    options = {"lease_seconds": LEASE_SECONDS}
    async with Runpoint([agent], database=database, host=host, **options) as runpoint:  # type: ignore[arg-type]
        yield runpoint


async def until_open(attempt: Callable[[], Awaitable[T]]) -> T:
    """`attempt` once the session is not Locked: the dead process's lease ran out."""
    async with asyncio.timeout(30):
        while True:
            try:
                return await attempt()
            except Locked:
                await asyncio.sleep(0.05)


async def rollback_left_by_a_kill(rp: Runpoint) -> tuple[Run, SessionCheckpoint, Run]:
    """Runs "a" then "b" in a session, checkpointed between them, and the session locked
    by a rollback to that checkpoint whose lease ran out, as a kill leaves it."""
    first = await run(rp, "a")
    checkpoint = await rp.session_checkpoints.create(first.session_id)
    second = await run(rp, "b", first.session_id)
    dead = Rollback(checkpoint.checkpoint_id, Lease("dead", now() - 1))
    assert await rp.storage.lock_session(first.session_id, "rollback", dead)
    return first, checkpoint, second


async def test_a_rollback_whose_process_died_is_completed_by_the_next_request(
    rp: Runpoint, state: DirectoryState, recorder: Recorder, database: str
) -> None:
    first, checkpoint, second = await checkpointed_between_two_runs(rp, state)
    session_id = first.session_id

    await crashing_session.kill(
        database, state.root, session_id, "rollback", checkpoint.checkpoint_id
    )
    # half rolled back: the files are the checkpoint's, the rows are not; the lock stays
    assert state.files(session_id) == {"f": b"at a"}
    died = await rp.storage.get_session(session_id)
    assert died is not None and died.locked == "rollback" and died.rollback is not None
    assert died.rollback.checkpoint_id == checkpoint.checkpoint_id
    assert [r.run_id for r in await rp.list_runs(session_id)] == [first.run_id, second.run_id]
    (state.directory(session_id) / "f").write_bytes(b"scribbled")  # the restore is redone

    await until_open(lambda: rp.session_checkpoints.page(session_id, page_size=10))
    session = await rp.get_session(session_id)
    assert session.locked is None and session.rollback is None
    assert state.files(session_id) == {"f": b"at a"}
    assert [r.forked_from_run_id for r in await rp.list_runs(session_id)] == [first.run_id]
    assert (await rp.get_run(second.run_id)).run.hidden
    await run(rp, "c", session_id)
    assert recorder.seen[-1] == [*turn("a"), ("user", "c")]


@pytest.mark.parametrize("request_", ["new run", "continue"])
async def test_the_run_dialect_completes_a_rollback_whose_process_died(
    rp: Runpoint, recorder: Recorder, request_: str
) -> None:
    first, _, second = await rollback_left_by_a_kill(rp)
    session_id = first.session_id
    if request_ == "new run":
        await run(rp, "c", session_id)
        assert recorder.seen[-1] == [*turn("a"), ("user", "c")]
    else:  # the run it continues was rolled back out of the session meanwhile
        with pytest.raises(NotContinuable):
            await rp.continue_run(ContinueRun(run_id=second.run_id, input="again"))
    assert (await rp.get_session(session_id)).locked is None
    assert (await rp.get_run(second.run_id)).run.hidden


async def test_a_checkpoint_whose_process_died_mid_capture_becomes_failed(
    rp: Runpoint, state: DirectoryState, database: str
) -> None:
    session_id = (await run(rp, "a")).session_id
    await crashing_session.kill(database, state.root, session_id, "create")
    [(_, died)] = await rp.storage.list_session_checkpoints(session_id, limit=10, before=None)
    assert died.status is SessionCheckpointStatus.PENDING and died.lease is not None

    async with asyncio.timeout(30):  # PENDING until the dead process's lease runs out
        found = died
        while found.status is SessionCheckpointStatus.PENDING:
            await asyncio.sleep(0.05)
            found = await rp.session_checkpoints.get(session_id, died.checkpoint_id)
    assert found.status is SessionCheckpointStatus.FAILED and found.lease is None
    assert found.error_message == "its process stopped during the capture"
    assert await rp.storage.get_session_checkpoint(died.checkpoint_id) == found  # written
    assert await rp.storage.session_capture(died.checkpoint_id) is None
    with pytest.raises(Conflict):
        await rp.session_checkpoints.rollback(session_id, died.checkpoint_id)
    page, _ = await rp.session_checkpoints.page(session_id, page_size=10)
    assert page == [found]
    taken = await rp.session_checkpoints.create(session_id)
    assert taken.status is SessionCheckpointStatus.READY and taken.lease is None


async def test_an_operation_slower_than_its_lease_keeps_it(
    rp: Runpoint, state: DirectoryState, database: str
) -> None:
    session_id = (await run(rp, "a")).session_id
    checkpoint = await rp.session_checkpoints.create(session_id)
    await run(rp, "b", session_id)
    state.hold = asyncio.Event()
    rollback = asyncio.create_task(
        rp.session_checkpoints.rollback(session_id, checkpoint.checkpoint_id)
    )
    await state.restoring.wait()
    host = PluginHost([state, crashing_session.Gate()])  # it could take the rollback over
    async with Runpoint([crashing_session.agent], database=database, host=host) as other:
        for _ in range(3 * 4):  # three leases: renewed all along, never taken over
            with pytest.raises(Locked):
                await other.sessions.usable(session_id)
            await asyncio.sleep(LEASE_SECONDS / 4)
    state.hold.set()
    assert await rollback == checkpoint
    assert state.restores == 1  # not twice
    assert len(await rp.list_runs(session_id)) == 1


async def test_a_lease_taken_over_is_lost_to_its_first_holder(rp: Runpoint) -> None:
    session_id = (await run(rp, "a")).session_id
    late, fresh = Lease("first", now() - 1), Lease("second", now() + 30)
    assert await rp.storage.lock_session(session_id, "rollback", Rollback("cp", late))
    assert not await rp.storage.hold_rollback(session_id, Rollback("other-cp", fresh))
    assert await rp.storage.hold_rollback(session_id, Rollback("cp", fresh))  # taken over
    renewed = Lease("first", now() + 30)
    assert not await rp.storage.hold_rollback(session_id, Rollback("cp", renewed))
    assert not await rp.storage.rollback_session(session_id, [], "first")
    assert not await rp.storage.unlock_session(session_id, "first")
    assert (await rp.get_session(session_id)).locked == "rollback"
    assert await rp.storage.rollback_session(session_id, [], "second")
    assert (await rp.get_session(session_id)).rollback is None

    pending = SessionCheckpoint("cp", session_id, event_seq=0, lease=late)
    await rp.storage.add_session_checkpoint(pending)
    failed = SessionCheckpoint(
        "cp", session_id, 0, status=SessionCheckpointStatus.FAILED, error_message="gone"
    )
    assert await rp.storage.update_session_checkpoint(failed, None, None)  # it ran out
    ready = SessionCheckpoint("cp", session_id, 0, status=SessionCheckpointStatus.READY)
    assert not await rp.storage.update_session_checkpoint(ready, b"{}", "first")  # too late
    assert await rp.storage.get_session_checkpoint("cp") == failed


@pytest.mark.parametrize("left", ["checkpoint deleted", "restore refused"])
async def test_a_rollback_left_that_cannot_be_completed_unlocks_the_session_as_it_is(
    rp: Runpoint, state: DirectoryState, left: str
) -> None:
    first, checkpoint, second = await rollback_left_by_a_kill(rp)
    session_id = first.session_id
    if left == "checkpoint deleted":
        await rp.storage.delete_session_checkpoint(checkpoint.checkpoint_id)
    else:
        state.fail_restore = 1
    page, _ = await rp.session_checkpoints.page(session_id, page_size=10)  # no error
    assert (await rp.get_session(session_id)).locked is None
    assert [r.run_id for r in await rp.list_runs(session_id)] == [first.run_id, second.run_id]
    assert len(page) == (left == "restore refused")
