"""Checks of each run's event log: events read back exactly, in order, from any point; only
the run's writer appends, alone or with a boundary."""

from __future__ import annotations

import asyncio

import msgspec

from runpoint.conformance import build
from runpoint.conformance.suite import Capability, check
from runpoint.core.errors import Conflict
from runpoint.core.types import Run, RunEvent
from runpoint.seams.storage import Storage

EVENTS = Capability.EVENTS


def events(run: Run, first: int, count: int) -> list[RunEvent]:
    """Events of `run` numbered from `first`, with data whose keys are out of order, nested
    values, text with a NUL and created_at values that only a float's every bit tells apart."""
    return [
        RunEvent(
            event="RunContent" if seq % 2 else "ToolCallCompleted",
            run_id=run.run_id,
            session_id=run.session_id,
            agent_id=run.agent_id,
            created_at=1_750_000_000.1 + seq / 3,
            data={"z": seq, "content": f"part {seq} \x00é", "a": [{"b": None, "a": 1.5}]},
            seq=seq,
        )
        for seq in range(first, first + count)
    ]


@check(EVENTS)
async def events_read_back_exactly_in_order_from_any_point(store: Storage) -> None:
    _, run = await build.started(store)
    written = events(run, 1, 5)
    assert await store.append_events(run, written[:2])
    assert await store.append_events(run, written[2:])
    read = await store.read_events(run, 0, 100)
    assert read == written, build.diff(read[0], written[0]) if read else read
    assert [list(e.data) for e in read] == [["z", "content", "a"]] * 5  # the keys' order
    assert await store.read_events(run, 2, 2) == written[2:4]
    assert await store.read_events(run, 5, 10) == []
    assert await store.last_event_seq(run.run_id) == 5


@check(EVENTS)
async def a_run_without_events_has_an_empty_log(store: Storage) -> None:
    _, run = await build.started(store)
    assert await store.read_events(run, 0, 10) == []
    assert await store.last_event_seq(run.run_id) == 0
    assert await store.last_event_seq("no-such-run") == 0


@check(EVENTS)
async def a_boundary_appends_its_events_with_it(store: Storage) -> None:
    _, run = await build.started(store)
    await store.save(run, [], None, events=events(run, 1, 3))
    assert [e.seq for e in await store.read_events(run, 0, 10)] == [1, 2, 3]
    stale = msgspec.structs.replace(run, revision=run.revision - 1)
    try:
        await store.save(stale, [], None, events=events(run, 4, 1))
    except Conflict:
        pass
    else:
        raise AssertionError("a stale writer's boundary was saved")
    assert await store.last_event_seq(run.run_id) == 3  # nothing of the refused boundary


@check(EVENTS)
async def only_the_runs_writer_appends_events(store: Storage) -> None:
    _, run = await build.started(store)
    stale = msgspec.structs.replace(run)
    await store.save(run, [], None)  # another writer moved the run on
    assert not await store.append_events(stale, events(run, 1, 2))
    assert await store.read_events(run, 0, 10) == []
    assert await store.append_events(run, events(run, 1, 2))


@check(EVENTS)
async def appends_of_several_runs_at_once_are_each_answered_for_their_own_run(
    store: Storage,
) -> None:
    runs = [(await build.started(store))[1] for _ in range(3)]
    stale = msgspec.structs.replace(runs[1])
    await store.save(runs[1], [], None)  # another writer moved this run on
    answers = await asyncio.gather(
        *(store.append_events(r, events(r, 1, 2)) for r in (*runs, stale))
    )
    assert answers == [True, True, True, False]
    for run in runs:
        assert await store.read_events(run, 0, 10) == events(run, 1, 2)


@check(EVENTS)
async def a_seq_stored_already_stands(store: Storage) -> None:
    _, run = await build.started(store)
    first = events(run, 1, 2)
    assert await store.append_events(run, first)
    again = [msgspec.structs.replace(e, event="RunError") for e in events(run, 2, 2)]
    assert await store.append_events(run, again)
    assert await store.read_events(run, 0, 10) == [*first, again[1]]


@check(EVENTS)
async def runs_logs_are_apart_and_deleted_with_their_session(store: Storage) -> None:
    session, run = await build.started(store)
    _, other = await build.started(store)
    assert await store.append_events(run, events(run, 1, 2))
    assert await store.append_events(other, events(other, 1, 1))
    assert await store.read_events(other, 0, 10) == events(other, 1, 1)
    assert await store.delete_sessions([session.session_id])
    assert await store.read_events(run, 0, 10) == []
    assert await store.last_event_seq(run.run_id) == 0
