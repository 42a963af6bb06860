"""Checks of long runs. A backend may keep a run's settled rows otherwise than a row a
message (the SQL backend packs them a window at a time): whatever it does, every range,
boundary, role, fork point, trim and removal reads as the rows were written."""

from __future__ import annotations

from runpoint.conformance import build
from runpoint.conformance.suite import Capability, check
from runpoint.core.types import Checkpoint, RunStatus, Segment
from runpoint.seams.storage import Storage

TRANSCRIPTS, CHECKPOINTS = Capability.TRANSCRIPTS, Capability.CHECKPOINTS
RETENTION = Capability.RETENTION
LONG = 130  # messages: a checkpoint every second one
EDGES = (0, 1, 31, 32, 33, 45, 63, 64, 65, 96, 127, 129, LONG)


def _indexes(checkpoints: list[Checkpoint]) -> list[int]:
    return [c.message_index for c in checkpoints]


@check(TRANSCRIPTS)
async def a_long_run_reads_back_every_range(store: Storage) -> None:
    _, run = await build.finished(store, LONG)
    every = build.messages(LONG)
    for start in EDGES:
        for upto in EDGES:
            if upto >= start:
                got = await store.read_messages(run.segments, upto, start=start)
                assert got == every[start:upto], f"messages [{start}, {upto})"
    views = await store.read_views(run.segments, 70, start=30)
    assert build.as_json(views) == build.as_json(every[30:70])


@check(TRANSCRIPTS)
async def a_long_run_finds_the_last_message_of_a_role(store: Storage) -> None:
    _, run = await build.finished(store, LONG)  # users at even indexes, assistants at odd
    for before in EDGES[1:]:
        user = await store.last_index(run.segments, before, "user")
        assert user == (before - 1) // 2 * 2, f"user before {before}: {user}"
        assistant = await store.last_index(run.segments, before, "assistant")
        assert assistant == (None if before < 2 else before - 1 - before % 2), f"before {before}"
    assert await store.last_index(run.segments, LONG, "tool") is None


@check(CHECKPOINTS)
async def a_long_run_lists_its_checkpoints_at_every_boundary(store: Storage) -> None:
    _, run = await build.finished(store, LONG)
    listed = await store.list_checkpoints(run.segments)
    assert _indexes(listed) == list(range(2, LONG + 1, 2))
    seqs = [c.event_seq or 0 for c in listed]
    assert seqs == sorted(set(seqs)) and seqs[0] > 0, "each its boundary's place, in order"
    for upto in EDGES:
        got = await store.list_checkpoints(run.segments, upto)
        assert got == [c for c in listed if c.message_index <= upto], f"up to {upto}"


@check(TRANSCRIPTS)
async def a_long_fork_from_the_middle_of_a_long_run(store: Storage) -> None:
    _, source = await build.finished(store, LONG)
    fork = build.fork(source, 45, message_count=45)
    await store.create_runs([fork])
    own = build.messages(60, "fork")
    for at in range(2, 61, 2):
        await build.append(store, fork, own[at - 2 : at], build.checkpoint(fork, 45 + at))
    every = build.messages(45) + own
    assert await build.transcript(store, fork) == every
    for start, upto in ((40, 50), (44, 46), (45, 64), (50, 105), (0, 105)):
        assert await store.read_messages(fork.segments, upto, start=start) == every[start:upto]
    assert _indexes(await store.list_checkpoints(fork.segments)) == [
        *range(2, 45, 2),
        *range(47, 106, 2),
    ]
    assert await store.last_index(fork.segments, 100, "user") == 99
    assert await store.last_index(fork.segments, 45, "user") == 44, "the source's last"
    assert await build.transcript(store, source) == build.messages(LONG), "untouched"


@check(RETENTION)
async def a_long_source_removed_under_a_fork_keeps_what_the_fork_reads(store: Storage) -> None:
    _, source = await build.finished(store, LONG)
    fork = build.fork(source, 45, status=RunStatus.PAUSED, message_count=46)
    await store.create_runs([fork], {fork.run_id: build.messages(1, "fork")})
    before = [await build.transcript(store, fork), await store.list_checkpoints(fork.segments)]
    removed = await store.remove_runs([source.run_id])
    assert removed.run_ids == [source.run_id] and removed.messages >= LONG - 64
    after = [await build.transcript(store, fork), await store.list_checkpoints(fork.segments)]
    assert after == before, "the fork reads as before"
    fork.status = RunStatus.COMPLETED
    await store.save(fork, [], None)
    await store.remove_runs([fork.run_id])
    layout = [Segment(source.run_id, 0)]
    assert await store.read_messages(layout, LONG) == []
    assert await store.list_checkpoints(layout) == []


@check(RETENTION)
async def a_long_source_removed_under_an_edit_fork_keeps_the_rows_around_its_edit(
    store: Storage,
) -> None:
    _, source = await build.finished(store, LONG)
    fork = build.fork(source, 45, status=RunStatus.PAUSED, message_count=46)
    fork.segments = [
        Segment(source.run_id, 0, 10),
        Segment(fork.run_id, 10, 11),
        Segment(source.run_id, 11, 45),
        Segment(fork.run_id, 45),
    ]
    await store.create_runs([fork], {fork.run_id: build.messages(2, "edited")})
    before = [await build.transcript(store, fork), await store.list_checkpoints(fork.segments)]
    await store.remove_runs([source.run_id])
    after = [await build.transcript(store, fork), await store.list_checkpoints(fork.segments)]
    assert after == before, "the fork reads as before"
    layout = [Segment(source.run_id, 0)]
    kept = build.messages(45)
    assert await store.read_messages(layout, LONG) == kept[:10] + kept[11:], "the rest went"


@check(RETENTION)
async def keep_last_n_of_a_long_run(store: Storage) -> None:
    _, run = await build.finished(store, LONG)
    listed = await store.list_checkpoints(run.segments)
    removed = await store.trim_checkpoints(run.run_id, 3)
    assert removed.checkpoints == len(listed) - 3 and removed.size > 0
    assert await store.list_checkpoints(run.segments) == listed[-3:]
    assert await build.transcript(store, run) == build.messages(LONG)
