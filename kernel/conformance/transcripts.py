"""Checks of transcripts laid out by segments (copy-on-write forks), their checkpoints and
the session's event log that boundaries advance."""

from __future__ import annotations

import msgspec

from runpoint.conformance import build
from runpoint.conformance.suite import Capability, check
from runpoint.core.types import Message, Segment
from runpoint.seams.storage import Storage

TRANSCRIPTS, CHECKPOINTS = Capability.TRANSCRIPTS, Capability.CHECKPOINTS


@check(TRANSCRIPTS)
async def messages_read_back_whole_and_in_order(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    turns = build.tool_turn("call-1") + build.tool_turn("call-2")
    for i in (0, 2):
        await build.append(store, run, turns[i : i + 2])
    assert await build.transcript(store, run) == build.messages(1) + turns


@check(TRANSCRIPTS)
async def read_messages_reads_the_range_asked(store: Storage) -> None:
    _, run = await build.started(store, build.messages(6))
    every = build.messages(6)
    assert await store.read_messages(run.segments, 4, start=1) == every[1:4]
    assert await store.read_messages(run.segments, 0) == []
    assert await store.read_messages(run.segments, 10) == every


@check(TRANSCRIPTS)
async def views_are_the_messages_as_stored(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    turns = build.tool_turn("call-1") + build.tool_turn("call-2")
    await build.append(store, run, turns)
    every = build.messages(1) + turns
    views = await store.read_views(run.segments, 5, start=1)
    assert build.as_json(views) == build.as_json(every[1:5])
    [call] = views[0].tool_calls or []
    assert isinstance(call.arguments, msgspec.Raw) and isinstance(views[1].tool_args, msgspec.Raw)
    assert await store.read_views(run.segments, 0) == []


@check(TRANSCRIPTS)
async def a_fork_reads_its_source_prefix_then_its_own_messages(store: Storage) -> None:
    _, source = await build.started(store, build.messages(6))
    fork = build.fork(source, 3, message_count=5)
    await store.create_runs([fork], {fork.run_id: build.messages(2, "fork")})
    assert await build.transcript(store, fork) == build.messages(3) + build.messages(2, "fork")
    assert await store.read_messages(fork.segments, 5, start=2) == (
        build.messages(3)[2:] + build.messages(2, "fork")
    )
    # the source is untouched
    assert await build.transcript(store, source) == build.messages(6)


@check(TRANSCRIPTS)
async def a_fork_of_a_fork_reads_through_every_segment(store: Storage) -> None:
    _, source = await build.started(store, build.messages(4))
    first = build.fork(source, 2, message_count=4)
    await store.create_runs([first], {first.run_id: build.messages(2, "first")})
    second = build.fork(first, 3, message_count=4)
    await store.create_runs([second], {second.run_id: build.messages(1, "second")})
    assert [s.run_id for s in second.segments] == [source.run_id, first.run_id, second.run_id]
    expected = build.messages(2) + build.messages(1, "first") + build.messages(1, "second")
    assert await build.transcript(store, second) == expected


@check(TRANSCRIPTS)
async def a_fork_reads_no_sibling_and_no_source_tail(store: Storage) -> None:
    _, source = await build.started(store, build.messages(2))
    forks = [build.fork(source, 2, message_count=3) for _ in range(2)]
    for fork, label in zip(forks, ("one", "two"), strict=True):
        await store.create_runs([fork], {fork.run_id: build.messages(1, label)})
    await build.append(store, source, build.messages(1, "tail"))
    assert await build.transcript(store, forks[0]) == build.messages(2) + build.messages(1, "one")


@check(TRANSCRIPTS)
async def a_fork_born_with_edits_holds_its_rows_between_its_sources(store: Storage) -> None:
    """A fork that replaced messages 1 and 3 of its source's first 5: its own rows at 1, 3
    and from 5 on, written with it in index order; the rest read through to the source's
    rows, and later saves append at the end."""
    _, source = await build.started(store, build.messages(6))
    await build.append(store, source, [], build.checkpoint(source, 6))
    fork = build.fork(source, 5, message_count=6)
    own = Segment(fork.run_id, 1, 2), Segment(fork.run_id, 3, 4)
    segments = [
        Segment(source.run_id, 0, 1),
        own[0],
        Segment(source.run_id, 2, 3),
        own[1],
        Segment(source.run_id, 4, 5),
        fork.segments[-1],
    ]
    fork = msgspec.structs.replace(fork, segments=segments)
    edited = build.messages(3, "edited")
    await store.create_runs([fork], {fork.run_id: edited})
    every = build.messages(6)
    expected = [every[0], edited[0], every[2], edited[1], every[4], edited[2]]
    assert await build.transcript(store, fork) == expected
    assert await store.read_messages(fork.segments, 4, start=1) == expected[1:4]
    assert await store.last_index(fork.segments, 5, "user") == 4
    assert await store.last_index(fork.segments, 2, "user") == 1
    assert await store.last_index(fork.segments, 4, "assistant") == 3
    await build.append(store, fork, build.messages(1, "later"), build.checkpoint(fork, 7))
    assert (await build.transcript(store, fork))[6:] == build.messages(1, "later")
    listed = await store.list_checkpoints(fork.segments)
    assert [(c.run_id, c.message_index) for c in listed] == [(fork.run_id, 7)]
    assert await build.transcript(store, source) == every, "the source is untouched"


@check(TRANSCRIPTS)
async def last_index_finds_the_last_message_of_a_role_before_a_boundary(store: Storage) -> None:
    _, source = await build.started(store, build.messages(5))  # user at 0, 2, 4
    fork = build.fork(source, 3, message_count=5)
    await store.create_runs([fork], {fork.run_id: [Message(role="assistant", content="a")] * 2})
    assert await store.last_index(source.segments, 5, "user") == 4
    assert await store.last_index(source.segments, 4, "user") == 2
    assert await store.last_index(fork.segments, 5, "user") == 2, "read the source's tail"
    assert await store.last_index(fork.segments, 5, "assistant") == 4
    assert await store.last_index(fork.segments, 1, "assistant") is None
    assert await store.last_index(source.segments, 5, "tool") is None


@check(TRANSCRIPTS)
async def the_event_log_takes_a_place_per_message_then_one_per_boundary(store: Storage) -> None:
    session, run = await build.started(store, build.messages(2))
    await build.append(store, run, build.messages(3, "more"))
    await build.append(store, run, [])
    got = await store.get_session(session.session_id)
    assert got is not None and got.event_seq == 3 + 4 + 1, got and got.event_seq


@check(CHECKPOINTS)
async def a_checkpoint_reads_back_with_its_place_in_the_event_log(store: Storage) -> None:
    session, run = await build.started(store, build.messages(1))
    mark = build.checkpoint(run, 3)
    mark.message_id, mark.message_role, mark.message_preview = "m-3", "assistant", "Done."
    await build.append(store, run, build.messages(2, "more"), mark)
    got = await store.get_session(session.session_id)
    assert got is not None
    [listed] = await store.list_checkpoints(run.segments)
    assert listed.event_seq == got.event_seq, "a checkpoint's cursor is its boundary's place"
    listed.event_seq = None
    assert listed == mark


@check(CHECKPOINTS)
async def checkpoints_are_listed_by_message_index(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    for index in (2, 4, 6):
        await build.append(store, run, build.messages(2, str(index)), build.checkpoint(run, index))
    fork = build.fork(run, 4, message_count=6)
    await store.create_runs([fork], {fork.run_id: build.messages(2, "fork")})
    await build.append(store, fork, build.messages(1, "fork"), build.checkpoint(fork, 7))
    await build.append(store, fork, [], build.checkpoint(fork, 5))
    listed = await store.list_checkpoints(fork.segments)
    assert [c.message_index for c in listed] == [2, 4, 5, 7]
    assert [c.run_id for c in listed] == [run.run_id] * 2 + [fork.run_id] * 2


@check(CHECKPOINTS)
async def list_checkpoints_stops_at_upto(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    for index in (2, 4, 6):
        await build.append(store, run, build.messages(2, str(index)), build.checkpoint(run, index))
    upto = await store.list_checkpoints(run.segments, upto=4)
    assert [c.message_index for c in upto] == [2, 4]
    assert await store.list_checkpoints(run.segments, upto=1) == []


@check(CHECKPOINTS)
async def a_fork_inherits_its_sources_checkpoints_up_to_the_fork_point(store: Storage) -> None:
    _, source = await build.started(store, build.messages(2))
    await build.append(store, source, [], build.checkpoint(source, 2))
    await build.append(store, source, build.messages(2, "tail"), build.checkpoint(source, 4))
    fork = build.fork(source, 2, message_count=3)
    await store.create_runs([fork], {fork.run_id: build.messages(1, "fork")})
    await build.append(store, fork, [], build.checkpoint(fork, 3))
    listed = await store.list_checkpoints(fork.segments)
    assert [(c.run_id, c.message_index) for c in listed] == [
        (source.run_id, 2),
        (fork.run_id, 3),
    ]


@check(CHECKPOINTS)
async def the_first_checkpoint_at_an_index_stands(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    first = build.checkpoint(run, 2)
    await build.append(store, run, build.messages(1, "answer"), first)
    await build.append(store, run, [], build.checkpoint(run, 2, "end"))
    [listed] = await store.list_checkpoints(run.segments)
    assert (listed.checkpoint_id, listed.reason) == (first.checkpoint_id, "checkpoint")
