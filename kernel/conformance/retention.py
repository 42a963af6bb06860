"""Checks of retention: removals keep exactly what a surviving reader reads (a fork, an
edit-fork, a session fork, a session checkpoint), never take a run that is not finished,
and keep the last checkpoints asked for."""

from __future__ import annotations

from typing import Any

import msgspec

from runpoint.conformance import build
from runpoint.conformance.sessions import refused
from runpoint.conformance.suite import Capability, check
from runpoint.core.errors import NotFound
from runpoint.core.types import (
    Run,
    RunEvent,
    RunStatus,
    Segment,
    Session,
    SessionCapture,
    SessionCheckpointStatus,
)
from runpoint.seams.retention import Removed
from runpoint.seams.storage import Storage

RETENTION = Capability.RETENTION


async def _reads(store: Storage, run: Run) -> Any:
    """What a reader of the run sees: its transcript and timeline, as JSON."""
    return build.as_json(
        [await build.transcript(store, run), await store.list_checkpoints(run.segments)]
    )


async def _stored(store: Storage, run_id: str) -> tuple[int, list[int]]:
    layout = [Segment(run_id, 0)]
    return len(await store.read_messages(layout, 1000)), [
        c.message_index for c in await store.list_checkpoints(layout)
    ]


def _session_fork(source_session: Session, source: Run) -> tuple[Session, Run]:
    """A session fork of `source`'s session (its copy of `source`, reading its rows)."""
    copy = build.session(forked_from_session_id=source_session.session_id)
    fork = msgspec.structs.replace(
        build.fork(source, source.message_count),
        session_id=copy.session_id,
        forked_from_session_id=source_session.session_id,
    )
    return copy, fork


@check(RETENTION)
async def a_source_removed_under_a_live_fork_keeps_what_the_fork_reads(store: Storage) -> None:
    session, source = await build.finished(store)
    fork = build.fork(source, 6, status=RunStatus.PAUSED, message_count=7)
    await store.create_runs([fork], {fork.run_id: build.messages(1, "fork")})
    before = await _reads(store, fork)
    removed = await store.remove_runs([source.run_id, fork.run_id])
    assert removed.run_ids == [source.run_id], "the paused fork stays"
    assert (removed.runs, removed.sessions, removed.messages, removed.checkpoints) == (1, 0, 4, 2)
    assert await store.get_run(source.run_id) is None
    assert await _reads(store, fork) == before, "the fork reads byte for byte as before"
    assert await _stored(store, source.run_id) == (6, [2, 4, 6])
    # once the fork finished and goes, what it read goes with it, and the session
    fork.status = RunStatus.COMPLETED
    await store.save(fork, [], None)
    gone = await store.remove_runs([fork.run_id])
    assert (gone.runs, gone.sessions, gone.messages, gone.checkpoints) == (1, 1, 7, 3)
    assert await _stored(store, source.run_id) == (0, [])
    assert await store.get_session(session.session_id) is None


@check(RETENTION)
async def a_source_removed_under_an_edit_fork_keeps_the_rows_between_its_edits(
    store: Storage,
) -> None:
    _, source = await build.finished(store)
    fork = build.fork(source, 5, status=RunStatus.PAUSED, message_count=6)
    fork.segments = [
        Segment(source.run_id, 0, 1),
        Segment(fork.run_id, 1, 2),
        Segment(source.run_id, 2, 5),
        Segment(fork.run_id, 5),
    ]
    await store.create_runs([fork], {fork.run_id: build.messages(2, "edited")})
    before = await _reads(store, fork)
    removed = await store.remove_runs([source.run_id])
    assert (removed.runs, removed.messages) == (1, 6), "0 and 2 to 4 stay, 1 and 5 on go"
    assert await _reads(store, fork) == before
    assert await _stored(store, source.run_id) == (4, [4])


@check(RETENTION)
async def a_session_deleted_under_a_session_fork_keeps_what_the_fork_reads(
    store: Storage,
) -> None:
    source_session, source = await build.finished(store)
    copy, fork = _session_fork(source_session, source)
    await store.create_sessions([copy], [fork])
    before = await _reads(store, fork)
    assert await store.delete_sessions([source_session.session_id])
    assert await store.get_session(source_session.session_id) is None
    assert await store.get_run(source.run_id) is None
    assert await _reads(store, fork) == before
    assert await store.delete_sessions([copy.session_id])
    assert await _stored(store, source.run_id) == (0, [])


@check(RETENTION)
async def a_session_checkpoint_keeps_what_it_captured(store: Storage) -> None:
    session, source = await build.finished(store, 4)
    paused = build.run(session, status=RunStatus.PAUSED)
    await store.create_runs([paused])
    captured = build.session_checkpoint(session)
    await store.add_session_checkpoint(captured)
    ready = msgspec.structs.replace(captured, status=SessionCheckpointStatus.READY, lease=None)
    capture = msgspec.json.encode(SessionCapture(session, [source]))
    assert await store.update_session_checkpoint(ready, capture, "me")
    assert (await store.remove_runs([source.run_id])).runs == 1
    assert await _stored(store, source.run_id) == (4, [2, 4]), "a rollback reads them"
    await store.delete_session_checkpoint(captured.checkpoint_id)
    assert await _stored(store, source.run_id) == (0, [])


@check(RETENTION)
async def a_run_not_finished_is_never_removed(store: Storage) -> None:
    kept = []
    for status in (RunStatus.PAUSED, RunStatus.RUNNING, RunStatus.PENDING):
        _, run = await build.started(store, build.messages(2), status=status)
        kept.append(run.run_id)
    removed = await store.remove_runs(kept)
    assert removed == Removed()
    for run_id in kept:
        assert await store.get_run(run_id) is not None
    assert await store.drop_events(kept) == Removed()


@check(RETENTION)
async def a_run_a_later_run_follows_stays_until_that_one_goes(store: Storage) -> None:
    session, first = await build.started(store, build.messages(2))
    second = build.run(session, message_count=2, previous_run_id=first.run_id)
    await store.create_runs([second], {second.run_id: build.messages(2, "second")})
    assert (await store.remove_runs([first.run_id])).runs == 0, "the second reads it as history"
    assert await store.get_run(first.run_id) is not None
    removed = await store.remove_runs([first.run_id, second.run_id])
    assert (removed.runs, removed.sessions, removed.messages) == (2, 1, 4)
    assert await store.get_session(session.session_id) is None


@check(RETENTION)
async def a_dry_run_removes_nothing_and_says_what_it_would(store: Storage) -> None:
    _, run = await build.finished(store, 4)
    would = await store.remove_runs([run.run_id], dry_run=True)
    assert (would.runs, would.sessions, would.messages, would.checkpoints) == (1, 1, 4, 2)
    assert await store.get_run(run.run_id) is not None
    assert await _stored(store, run.run_id) == (4, [2, 4])
    assert (await store.trim_checkpoints(run.run_id, 1, dry_run=True)).checkpoints == 1
    assert await _stored(store, run.run_id) == (4, [2, 4])


@check(RETENTION)
async def keep_last_n_keeps_the_last_checkpoints_the_end_and_those_a_fork_reads(
    store: Storage,
) -> None:
    _, run = await build.finished(store, 12)
    fork = build.fork(run, 3, status=RunStatus.PAUSED)
    await store.create_runs([fork])
    removed = await store.trim_checkpoints(run.run_id, 2)
    assert removed.checkpoints == 3 and removed.size > 0
    assert await _stored(store, run.run_id) == (12, [2, 10, 12]), "2: the fork reads it"
    assert (await store.trim_checkpoints(run.run_id, 0)).checkpoints == 1, "the end stays"
    assert await _stored(store, run.run_id) == (12, [2, 12])
    assert await store.trim_checkpoints(fork.run_id, 0) == Removed(), "paused: untouched"


@check(RETENTION)
async def dropped_events_leave_the_run(store: Storage) -> None:
    _, run = await build.started(store, build.messages(2))
    events = [RunEvent.of(run, "RunContent", content="hi"), RunEvent.of(run, "RunCompleted")]
    for seq, event in enumerate(events, 1):
        event.seq = seq
    await store.save(run, [], None, events=events)
    dropped = await store.drop_events([run.run_id])
    assert dropped.events == 2 and dropped.size > 0
    assert await store.read_events(run, 0, 10) == []
    assert await store.get_run(run.run_id) is not None


@check(RETENTION)
async def finished_runs_are_read_a_batch_at_a_time(store: Storage) -> None:
    ids = set()
    for status in (RunStatus.COMPLETED, RunStatus.PAUSED, RunStatus.ERROR, RunStatus.CANCELLED):
        _, run = await build.started(store, status=status)
        ids.add(run.run_id)
    found: list[str] = []
    after = 0
    while True:
        batch, after = await store.finished_runs(after, 2)
        found += [r.run_id for r in batch if r.run_id in ids]
        assert len(batch) <= 2
        if not after:
            break
    assert len(found) == 3 == len(set(found)), "each finished run once, the paused one not"
    assert store.removals_per_transaction >= 1, "the runs a sweep's removal may take"


@check(RETENTION)
async def a_fork_of_a_source_removed_since_it_was_read_is_not_born(store: Storage) -> None:
    _, source = await build.finished(store, 4)
    assert (await store.remove_runs([source.run_id])).runs == 1
    fork = build.fork(source, 2)
    try:
        await store.create_runs([fork])
    except NotFound:
        assert await store.get_run(fork.run_id) is None
        return
    raise AssertionError("expected NotFound")


@check(RETENTION)
async def a_session_fork_of_a_source_removed_since_it_was_read_is_not_born(
    store: Storage,
) -> None:
    source_session, source = await build.finished(store, 4)
    assert (await store.remove_runs([source.run_id])).sessions == 1
    copy, fork = _session_fork(source_session, source)
    await refused(store.create_sessions([copy], [fork]), NotFound)  # the rows it reads went
    assert await store.get_session(copy.session_id) is None
    assert await store.get_run(fork.run_id) is None


@check(RETENTION)
async def a_fork_of_a_removed_source_whose_rows_a_reader_holds_is_born_whole(
    store: Storage,
) -> None:
    source_session, source = await build.finished(store)
    held, holder = _session_fork(source_session, source)
    await store.create_sessions([held], [holder])
    before = await _reads(store, holder)
    assert (await store.remove_runs([source.run_id])).sessions == 1
    # read before the removal, written after it: what it reads, the holder holds
    copy, fork = _session_fork(source_session, source)
    await store.create_sessions([copy], [fork])
    assert await _reads(store, fork) == before
    # into a session that went meanwhile, nothing is born
    late = build.fork(source, 4)
    await refused(store.create_runs([late]), NotFound)
    assert await store.get_run(late.run_id) is None
