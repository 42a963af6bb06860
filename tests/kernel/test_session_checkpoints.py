"""Session checkpoints: the event log's cursor, capture, pages, rollback in place, forks,
state-capture plugins, locks."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from runpoint.core.errors import Conflict, Locked, NotContinuable, NotFound
from runpoint.core.types import Run, RunStatus, Segment, SessionCheckpoint, SessionCheckpointStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost
from tests.directory_state import DirectoryState
from tests.kernel.test_context import Recorder, turn


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def rp(database: str, state: DirectoryState, recorder: Recorder) -> AsyncIterator[Runpoint]:
    agent = Agent(id="echo", model=ScriptedModel(recorder))
    async with Runpoint([agent], database=database, host=PluginHost([state])) as runpoint:
        yield runpoint


async def sql(rp: Runpoint, query: str, **params: object) -> list[tuple[object, ...]]:
    async with rp.storage.engine.connect() as conn:  # type: ignore[attr-defined]
        return [tuple(row) for row in await conn.execute(text(query), params)]


async def run(rp: Runpoint, message: str, session_id: str | None = None) -> Run:
    return await (
        await rp.create_run(CreateRun(agent_id="echo", message=message, session_id=session_id))
    ).result()


async def checkpointed_between_two_runs(
    rp: Runpoint, state: DirectoryState
) -> tuple[Run, SessionCheckpoint, Run]:
    """Runs "a" then "b" in a session whose directory holds f: "at a" at the checkpoint
    taken between them, "after b" now."""
    first = await run(rp, "a")
    state.directory(first.session_id).mkdir(parents=True)
    (state.directory(first.session_id) / "f").write_bytes(b"at a")
    checkpoint = await rp.session_checkpoints.create(first.session_id)
    second = await run(rp, "b", first.session_id)
    (state.directory(first.session_id) / "f").write_bytes(b"after b")
    return first, checkpoint, second


async def start_in_flight(rp: Runpoint, session_id: str, agent_id: str = "echo") -> Run:
    """A run of the session that is RUNNING (as if another process were executing it)."""
    return await rp.storage.start_in_session(
        Run(
            run_id=f"busy-{session_id}",
            session_id=session_id,
            agent_id=agent_id,
            status=RunStatus.RUNNING,
            segments=[Segment(f"busy-{session_id}", 0)],
        )
    )


async def test_the_event_log_orders_a_sessions_events(rp: Runpoint) -> None:
    first = await run(rp, "a")
    session_id = first.session_id
    second = await run(rp, "b", session_id)
    seqs = await sql(
        rp,
        "SELECT m.event_seq FROM messages m JOIN runs r ON r.run_id = m.run_id "
        "WHERE r.session_id = :s ORDER BY r.seq, m.idx",
        s=session_id,
    )
    cursors = [int(s) for (s,) in seqs]  # type: ignore[call-overload]
    assert len(cursors) == 4 and cursors == sorted(set(cursors))  # monotonic, no repeats
    # each boundary takes a place after its messages: its checkpoint is there
    _, [end] = await rp.timeline(second.run_id)
    assert end.event_seq is not None and end.event_seq > cursors[-1]
    session = await rp.get_session(session_id)
    assert session.event_seq >= end.event_seq
    # a session checkpoint is a cursor into the same log
    taken = await rp.session_checkpoints.create(session_id)
    assert taken.event_seq == session.event_seq
    await run(rp, "c", session_id)
    later = await rp.session_checkpoints.create(session_id)
    assert later.event_seq > taken.event_seq


async def test_checkpoints_are_paged_newest_first_and_deleted_idempotently(
    rp: Runpoint,
) -> None:
    session_id = (await run(rp, "a")).session_id
    taken = [await rp.session_checkpoints.create(session_id, label=f"n{i}") for i in range(5)]
    assert {c.status for c in taken} == {SessionCheckpointStatus.READY}
    pages, position = [], None
    while True:
        page, position = await rp.session_checkpoints.page(session_id, page_size=2, before=position)
        pages.append([c.label for c in page])
        if position is None:
            break
    assert pages == [["n4", "n3"], ["n2", "n1"], ["n0"]]

    assert await rp.session_checkpoints.get(session_id, taken[1].checkpoint_id) == taken[1]
    await rp.session_checkpoints.delete(session_id, taken[1].checkpoint_id)
    await rp.session_checkpoints.delete(session_id, taken[1].checkpoint_id)  # gone: fine
    with pytest.raises(NotFound):
        await rp.session_checkpoints.get(session_id, taken[1].checkpoint_id)
    other = (await run(rp, "b")).session_id
    with pytest.raises(NotFound):  # a checkpoint is found through its own session only
        await rp.session_checkpoints.get(other, taken[0].checkpoint_id)
    with pytest.raises(NotFound):
        await rp.session_checkpoints.create("no-such-session")


async def test_nothing_is_captured_or_rolled_back_while_a_run_is_in_flight(
    rp: Runpoint,
) -> None:
    session_id = (await run(rp, "a")).session_id
    ready = await rp.session_checkpoints.create(session_id)
    await start_in_flight(rp, session_id)
    with pytest.raises(Conflict):
        await rp.session_checkpoints.create(session_id)
    with pytest.raises(Conflict):
        await rp.session_checkpoints.rollback(session_id, ready.checkpoint_id)
    with pytest.raises(Conflict):  # a fork that must capture the session now
        await rp.session_checkpoints.fork(session_id)
    # the refused rollback left the session open; a checkpoint taken before still forks
    assert (await rp.get_session(session_id)).locked is None
    _, [fork] = await rp.session_checkpoints.fork(
        session_id, from_checkpoint_id=ready.checkpoint_id
    )
    assert len(await rp.list_runs(fork.session_id)) == 1


async def test_rollback_returns_the_session_to_the_checkpoint_in_place(
    rp: Runpoint, state: DirectoryState, recorder: Recorder
) -> None:
    first = await run(rp, "a")
    session_id = first.session_id
    sandbox = state.directory(session_id)
    (sandbox / "logs").mkdir(parents=True)
    (sandbox / "notes.txt").write_bytes(b"one\x00\xff")
    (sandbox / "logs" / "1.log").write_bytes(b"started")
    files_then = state.files(session_id)
    history_then = [(await rp.get_run(r.run_id)).messages for r in await rp.list_runs(session_id)]
    checkpoint = await rp.session_checkpoints.create(session_id, label="before b")

    (sandbox / "notes.txt").write_bytes(b"two")
    (sandbox / "logs" / "2.log").write_bytes(b"more")
    second = await run(rp, "b", session_id)
    after = await rp.session_checkpoints.create(session_id, label="after b")

    rolled = await rp.session_checkpoints.rollback(session_id, checkpoint.checkpoint_id)
    assert rolled == checkpoint
    assert state.files(session_id) == files_then  # byte for byte, the plugin's state
    live = await rp.list_runs(session_id)
    assert [r.forked_from_run_id for r in live] == [first.run_id]
    assert [(await rp.get_run(r.run_id)).messages for r in live] == history_then
    # what came after is history: readable, not live, and not to be continued
    hidden = await rp.get_run(second.run_id)
    assert hidden.run.hidden and [m.content for m in hidden.messages] == ["b", "re: b"]
    with pytest.raises(NotContinuable):
        await rp.continue_run(ContinueRun(run_id=second.run_id, input="again"))
    assert await rp.session_checkpoints.get(session_id, after.checkpoint_id) == after
    # a new run sees the history up to the checkpoint only
    await run(rp, "c", session_id)
    assert recorder.seen[-1] == [*turn("a"), ("user", "c")]
    # and the checkpoint taken after b still seeds a rollback to it
    await rp.session_checkpoints.rollback(session_id, after.checkpoint_id)
    assert state.files(session_id)["notes.txt"] == b"two"
    await run(rp, "d", session_id)
    assert recorder.seen[-1] == [*turn("a"), *turn("b"), ("user", "d")]


async def test_a_capture_that_fails_makes_a_failed_checkpoint(
    rp: Runpoint, state: DirectoryState
) -> None:
    session_id = (await run(rp, "a")).session_id
    state.fail_capture = True
    failed = await rp.session_checkpoints.create(session_id)
    assert failed.status is SessionCheckpointStatus.FAILED
    assert failed.error_message and "the sandbox did not answer" in failed.error_message
    assert await rp.session_checkpoints.get(session_id, failed.checkpoint_id) == failed
    assert await rp.storage.session_capture(failed.checkpoint_id) is None
    with pytest.raises(Conflict):
        await rp.session_checkpoints.rollback(session_id, failed.checkpoint_id)
    with pytest.raises(Conflict):  # a fork that must take its own checkpoint fails too
        await rp.session_checkpoints.fork(session_id)
    page, _ = await rp.session_checkpoints.page(session_id, page_size=10)
    assert page == [failed]  # the fork's attempt left no checkpoint behind


@pytest.mark.parametrize("count", [1, 4])
async def test_fork_makes_count_sessions_at_the_checkpoint(
    rp: Runpoint, state: DirectoryState, recorder: Recorder, count: int
) -> None:
    first, checkpoint, _ = await checkpointed_between_two_runs(rp, state)
    session_id = first.session_id
    messages = (await sql(rp, "SELECT count(*) FROM messages"))[0]

    forked_at, forks = await rp.session_checkpoints.fork(
        session_id, from_checkpoint_id=checkpoint.checkpoint_id, count=count
    )
    assert forked_at == checkpoint and len(forks) == count
    assert (await sql(rp, "SELECT count(*) FROM messages"))[0] == messages  # none copied
    for fork in forks:
        assert (await rp.get_session(fork.session_id)).forked_from_session_id == session_id
        assert state.files(fork.session_id) == {"f": b"at a"}
        [copy] = await rp.list_runs(fork.session_id)
        assert copy.forked_from_run_id == first.run_id
        await run(rp, "x", fork.session_id)
        assert recorder.seen[-1] == [*turn("a"), ("user", "x")]
    # with no checkpoint named, one is taken now
    taken, [now_fork] = await rp.session_checkpoints.fork(session_id)
    assert taken.event_seq == (await rp.get_session(session_id)).event_seq
    assert state.files(now_fork.session_id) == {"f": b"after b"}
    assert len(await rp.list_runs(now_fork.session_id)) == 2


@pytest.mark.parametrize("named", [True, False])
async def test_a_fork_that_fails_leaves_nothing_behind(
    rp: Runpoint, state: DirectoryState, named: bool
) -> None:
    session_id = (await run(rp, "a")).session_id
    await run(rp, "b", session_id)
    state.directory(session_id).mkdir(parents=True)
    (state.directory(session_id) / "f").write_bytes(b"data")
    checkpoint = await rp.session_checkpoints.create(session_id)
    tables = ("sessions", "runs", "messages", "checkpoints", "session_checkpoints")
    before = [await sql(rp, f"SELECT count(*) FROM {t}") for t in tables]

    state.fail_restore = 3
    with pytest.raises(Conflict, match="state 'files' could not be restored: OSError"):
        await rp.session_checkpoints.fork(
            session_id, from_checkpoint_id=checkpoint.checkpoint_id if named else None, count=4
        )
    assert state.restores == 3
    assert [await sql(rp, f"SELECT count(*) FROM {t}") for t in tables] == before
    assert state.sessions() == {session_id}


async def test_a_locked_session_refuses_work_until_unlocked(rp: Runpoint) -> None:
    session_id = (await run(rp, "a")).session_id
    assert await rp.storage.lock_session(session_id, "maintenance")
    with pytest.raises(Locked):
        await rp.storage.lock_session(session_id, "maintenance")
    with pytest.raises(Locked):
        await run(rp, "b", session_id)
    with pytest.raises(Locked):
        await rp.session_checkpoints.create(session_id)
    assert await rp.storage.unlock_session(session_id)
    await run(rp, "b", session_id)
    assert not await rp.storage.lock_session("no-such-session", "maintenance")
