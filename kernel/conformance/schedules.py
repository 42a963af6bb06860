"""Checks of schedules: stored whole, listed by team, found when due, moved on by one
mover per tick, and the record of what each fired kept once per (schedule, tick)."""

from __future__ import annotations

import msgspec

from runpoint.conformance import build
from runpoint.conformance.suite import Capability, check
from runpoint.core.schedule import Schedule, ScheduleRun
from runpoint.core.types import RunStatus
from runpoint.seams.storage import Storage

SCHEDULES = Capability.SCHEDULES


def schedule(team: str, next_run_at: float | None = 1000.0, **fields: object) -> Schedule:
    return Schedule(
        schedule_id=build.fresh("schedule"),
        name="n",
        agent_id="a",
        message="go",
        team_id=team,
        cron_expr="* * * * *",
        next_run_at=next_run_at,
        **fields,  # type: ignore[arg-type]
    )


@check(SCHEDULES)
async def a_schedule_reads_back_whole_and_only_its_team_lists_it(store: Storage) -> None:
    team = build.fresh("team")
    made = schedule(team, description="d", timezone="Europe/Berlin", missed="run_once")
    await store.put_schedule(made)
    assert await store.get_schedule(made.schedule_id) == made
    changed = msgspec.structs.replace(made, name="m", enabled=False, next_run_at=None)
    await store.put_schedule(changed)
    assert await store.get_schedule(changed.schedule_id) == changed
    assert await store.list_schedules(team_id=team, limit=10, offset=0) == [changed]
    assert await store.list_schedules(team_id=build.fresh("team"), limit=10, offset=0) == []
    assert await store.delete_schedule(made.schedule_id)
    assert await store.get_schedule(made.schedule_id) is None
    assert not await store.delete_schedule(made.schedule_id)


@check(SCHEDULES)
async def a_due_schedule_is_held_by_one_taker_and_moves_on_once_per_tick(store: Storage) -> None:
    team = build.fresh("team")
    due, later, off = schedule(team, 5.0), schedule(team, 9e12), schedule(team, 5.0, enabled=False)
    for s in (due, later, off):
        await store.put_schedule(s)
    found = {s.schedule_id for s in await store.claim_due(10.0, 10_000, 40.0)}
    assert due.schedule_id in found and not {later.schedule_id, off.schedule_id} & found
    held = {s.schedule_id for s in await store.claim_due(39.0, 10_000, 69.0)}
    assert due.schedule_id not in held, "held by the first taker"
    assert due.schedule_id in {s.schedule_id for s in await store.claim_due(40.0, 10_000, 70.0)}
    assert await store.advance_schedule(due.schedule_id, 5.0, 65.0)
    assert not await store.advance_schedule(due.schedule_id, 5.0, 65.0)  # one mover
    moved = await store.get_schedule(due.schedule_id)
    assert moved is not None and moved.next_run_at == 65.0
    # moved on, it is let go: its next tick is anyone's
    assert due.schedule_id in {s.schedule_id for s in await store.claim_due(65.0, 10_000, 95.0)}


@check(SCHEDULES)
async def a_tick_is_recorded_once_and_each_attempt_by_one_writer(store: Storage) -> None:
    made = schedule(build.fresh("team"))
    await store.put_schedule(made)
    fired = ScheduleRun(schedule_id=made.schedule_id, tick=60.0, run_id="r1", session_id="s1")
    assert await store.record_fired(fired)
    assert not await store.record_fired(msgspec.structs.replace(fired, run_id="r2"))
    assert await store.get_fired(made.schedule_id, "r1") == fired
    assert await store.get_fired(made.schedule_id, "r2") is None
    retry = msgspec.structs.replace(fired, attempt=2, attempt_at=fired.attempt_at + 1)
    assert await store.update_fired(retry, 1)
    assert not await store.update_fired(msgspec.structs.replace(retry, attempt=3), 1)
    # its run is gone: a look settles it
    assert made.schedule_id in {f.schedule_id for f in await store.unsettled_fired(0.0, 10_000)}
    settled = msgspec.structs.replace(retry, settled=True)
    assert await store.update_fired(settled, 2)
    assert await store.list_fired(made.schedule_id, limit=10, offset=0) == [settled]
    assert made.schedule_id not in {
        f.schedule_id for f in await store.unsettled_fired(1e12, 10_000)
    }


@check(SCHEDULES)
async def a_fired_run_in_flight_needs_a_look_only_once_past_its_deadline(store: Storage) -> None:
    _, run = await build.started(store, status=RunStatus.RUNNING)
    made = schedule(build.fresh("team"))
    await store.put_schedule(made)
    fired = ScheduleRun(
        schedule_id=made.schedule_id,
        tick=60.0,
        run_id=run.run_id,
        session_id=run.session_id,
        deadline=100.0,
    )
    assert await store.record_fired(fired)
    looked_at = {(f.schedule_id, f.tick) for f in await store.unsettled_fired(99.0, 10_000)}
    assert (made.schedule_id, 60.0) not in looked_at
    looked_at = {(f.schedule_id, f.tick) for f in await store.unsettled_fired(100.0, 10_000)}
    assert (made.schedule_id, 60.0) in looked_at


@check(SCHEDULES)
async def records_of_runs_done_or_gone_are_settled_at_once(store: Storage) -> None:
    made = schedule(build.fresh("team"))
    await store.put_schedule(made)
    ticks = {}
    for tick, status in enumerate((RunStatus.COMPLETED, RunStatus.RUNNING, RunStatus.ERROR)):
        _, run = await build.started(store, status=status)
        fired = ScheduleRun(
            schedule_id=made.schedule_id, tick=tick, run_id=run.run_id, session_id=run.session_id
        )
        assert await store.record_fired(fired)
        ticks[status] = float(tick)
    gone = ScheduleRun(schedule_id=made.schedule_id, tick=9.0, run_id="gone", session_id="s")
    assert await store.record_fired(gone)
    assert await store.settle_done() >= 2
    settled = {
        f.tick: f.settled for f in await store.list_fired(made.schedule_id, limit=9, offset=0)
    }
    assert settled == {ticks[RunStatus.COMPLETED]: True, 9.0: True} | {
        ticks[RunStatus.RUNNING]: False,
        ticks[RunStatus.ERROR]: False,
    }
