"""Schedules: each tick fires one ordinary run across processes (a claimed tick whose
process died included), missed ticks follow the schedule's policy, a failed run is retried
from its last checkpoint, one over its timeout is cancelled, and a team sees only its own."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import msgspec
import pytest

from runpoint import hookimpl
from runpoint.core import tenancy
from runpoint.core.errors import Conflict, InvalidArguments, NotFound
from runpoint.core.schedule import Schedule, ScheduleRun
from runpoint.core.types import RunStatus, now
from runpoint.facade import Runpoint
from runpoint.seams.host import PluginHost
from tests.kernel.crashing_session import kill_frozen
from tests.kernel.scheduled import AGENTS, every
from tests.kernel.test_recovery import until

SQL = pytest.mark.parametrize("database", ["sqlite", "postgresql"], indirect=True)


class Clock:
    def __init__(self, at: float) -> None:
        self.at = at

    def __call__(self) -> float:
        return self.at


class Counted:
    """The schedule hooks, counted."""

    def __init__(self) -> None:
        self.fired: list[ScheduleRun] = []
        self.missed = 0
        self.retried = 0

    @hookimpl
    def runpoint_schedule_fired(self, schedule: Schedule, fired: ScheduleRun, delay: float) -> None:
        self.fired.append(fired)

    @hookimpl
    def runpoint_schedule_missed(self, schedule: Schedule, ticks: int) -> None:
        self.missed += ticks

    @hookimpl
    def runpoint_schedule_retried(self, schedule: Schedule, fired: ScheduleRun) -> None:
        self.retried += 1


def driven(rp: Runpoint, clock: Callable[[], float]) -> Runpoint:
    rp.scheduler.clock = rp.schedules.clock = clock
    return rp


@pytest.fixture
async def rp(database: str) -> AsyncIterator[Runpoint]:
    async with Runpoint(AGENTS, database=database, schedule=False) as opened:
        yield opened


def on_the_hour(missed: str) -> Schedule:
    return Schedule(
        schedule_id="hourly",
        name="hourly",
        agent_id="echo",
        message="go",
        cron_expr="0 * * * *",
        missed=missed,  # type: ignore[arg-type]
    )


async def fired_runs(rp: Runpoint, schedule_id: str) -> list[ScheduleRun]:
    return await rp.schedules.runs(schedule_id, limit=10_000, offset=0)


@SQL
async def test_two_processes_racing_fire_each_tick_once(database: str) -> None:
    start = float(int(now()))
    clock = Clock(start)
    counted = [Counted(), Counted()]
    async with (
        Runpoint(AGENTS, database=database, schedule=False, host=PluginHost([counted[0]])) as a,
        Runpoint(AGENTS, database=database, schedule=False, host=PluginHost([counted[1]])) as b,
    ):
        made = [await driven(a, clock).schedules.create(every()) for _ in range(5)]
        driven(b, clock)
        for _ in range(40):  # 40 ticks of 5 schedules, both processes racing for each
            clock.at += 1
            await asyncio.gather(a.scheduler.run_due(), b.scheduler.run_due())
        for schedule in made:
            fired = await fired_runs(a, schedule.schedule_id)
            assert sorted(f.tick for f in fired) == [start + 1 + i for i in range(40)]
            assert len({f.run_id for f in fired}) == 40
        # every run is an ordinary one, and each tick made one (none lost to a race)
        sessions = await a.storage.list_sessions(team_id="default", limit=1000, offset=0)
        assert len(sessions) == 5 * 40
    assert len(counted[0].fired) + len(counted[1].fired) == 5 * 40  # each told once


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
async def test_two_server_processes_on_postgresql_fire_each_tick_once(database: str) -> None:
    async with Runpoint(AGENTS, database=database, schedule=False) as rp:
        made = [await rp.schedules.create(every()) for _ in range(10)]
    started = now()
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.kernel.scheduled",
            database,
            "8",
            cwd=Path(__file__).parents[2],
        )
        for _ in range(2)
    ]
    assert [await c.wait() for c in children] == [0, 0]
    async with Runpoint(AGENTS, database=database, schedule=False) as rp:
        for schedule in made:
            ticks = sorted(f.tick for f in await fired_runs(rp, schedule.schedule_id))
            assert len(ticks) >= 5, "the processes fired for most of their 8 seconds"
            # one run per second, none twice, none skipped, while they served
            assert ticks == [ticks[0] + i for i in range(len(ticks))]
            assert ticks[0] <= started + 4
            runs = [
                await rp.storage.get_run(f.run_id)
                for f in await fired_runs(rp, schedule.schedule_id)
            ]
            assert len({r.run_id for r in runs if r}) == len(ticks)


@SQL
async def test_a_process_killed_between_claiming_a_tick_and_its_run_leaves_it_to_another(
    database: str,
) -> None:
    async with Runpoint(AGENTS, database=database, schedule=False) as rp:
        hourly = msgspec.structs.replace(every(), cron_expr="0 * * * *", missed="run_once")
        # armed an hour ago: its one tick since is due, whoever gets to it
        schedule = await driven(rp, Clock(now() - 3600)).schedules.create(hourly)
        tick = schedule.next_run_at
        assert tick is not None and tick <= now()
    await kill_frozen("tests.kernel.scheduled", database, "freeze")
    async with Runpoint(AGENTS, database=database, schedule=False, lease_seconds=1.0) as rp:
        clock = Clock(now())
        driven(rp, clock)
        assert await rp.storage.list_sessions(team_id="default", limit=10, offset=0) == []
        await asyncio.sleep(1.2)  # the killed process's claims (1 s) run out: its hold too
        async with asyncio.timeout(10):
            while not await fired_runs(rp, schedule.schedule_id):
                clock.at = now()
                await rp.scheduler.run_due()
                await asyncio.sleep(0.2)
        [fired] = await fired_runs(rp, schedule.schedule_id)
        assert fired.tick == tick
        run = await until(rp, fired.run_id, RunStatus.COMPLETED)
        assert run.session_id == fired.session_id
        [session] = await rp.storage.list_sessions(team_id="default", limit=10, offset=0)
        assert len(await rp.storage.list_runs(session.session_id)) == 1


@pytest.mark.parametrize("missed", ["skip", "run_once"])
async def test_ticks_missed_while_no_server_ran_follow_the_policy(
    database: str, missed: str
) -> None:
    counted = Counted()
    hourly = on_the_hour(missed)
    start = datetime(2026, 6, 1, 9, 30, tzinfo=ZoneInfo("UTC")).timestamp()
    clock = Clock(start)
    async with Runpoint(
        AGENTS, database=database, schedule=False, host=PluginHost([counted])
    ) as rp:
        made = await driven(rp, clock).schedules.create(hourly)
        assert made.next_run_at == start + 1800
        clock.at = start + 3 * 3600 + 1800 + 600  # 13:10: 10:00, 11:00, 12:00 and 13:00 passed...
        await rp.scheduler.run_due()
        fired = await fired_runs(rp, "hourly")
        after = await rp.schedules.get("hourly")
    assert after.next_run_at == start + 4 * 3600 + 1800  # 14:00: on from now either way
    if missed == "skip":
        assert fired == [] and counted.missed == 4
    else:  # one run for them all, at the latest
        assert [f.tick for f in fired] == [start + 3 * 3600 + 1800] and counted.missed == 3


@SQL
async def test_a_tick_fired_before_its_key_went_fires_no_more(database: str) -> None:
    counted = Counted()
    hourly = on_the_hour("run_once")
    tick = datetime(2026, 6, 1, 10, 0, tzinfo=ZoneInfo("UTC")).timestamp()
    clock = Clock(tick - 1800)
    async with Runpoint(
        AGENTS, database=database, schedule=False, host=PluginHost([counted])
    ) as rp:
        await driven(rp, clock).schedules.create(hourly)
        clock.at = tick
        assert await rp.scheduler.run_due() == 1
        # its process died after the run was made, before it moved the schedule on; the
        # server stayed down until the retention sweep had removed the tick's key
        assert await rp.storage.advance_schedule("hourly", tick + 3600, tick)
        assert await rp.storage.remove_answered_keys(now() + 1, 1000) >= 1
        clock.at = tick + 600  # late past the grace: the tick is the latest missed
        assert await rp.scheduler.run_due() == 0
        fired = await fired_runs(rp, "hourly")
        assert [f.tick for f in fired] == [tick] and counted.missed == 0
        assert (await rp.schedules.get("hourly")).next_run_at == tick + 3600


async def test_late_ticks_within_the_grace_each_fire_in_order(rp: Runpoint) -> None:
    counted = Counted()
    rp.host.manager.register(counted)
    clock = Clock(1_800_000_000.0)
    made = await driven(rp, clock).schedules.create(every(5))
    assert made.next_run_at == 1_800_000_005.0
    clock.at += 95  # ticks 5 to 30 are more than a minute late: missed; 35 to 95 fire
    assert await rp.scheduler.run_due() == 13
    ticks = sorted(f.tick for f in await fired_runs(rp, made.schedule_id))
    assert ticks == [1_800_000_035.0 + 5 * i for i in range(13)]
    assert counted.missed == 6


async def test_each_tick_fires_a_run_of_the_schedules_model(rp: Runpoint) -> None:
    clock = Clock(float(int(now())))
    made = await driven(rp, clock).schedules.create(every(5, model="scripted:echo"))
    clock.at += 5
    assert await rp.scheduler.run_due() == 1
    [fired] = await fired_runs(rp, made.schedule_id)
    run = await until(rp, fired.run_id, RunStatus.COMPLETED)
    assert run.model == "scripted:echo"  # recorded, and what answered: echo's answer
    assert run.content == "go"


@SQL
async def test_a_failed_run_is_retried_from_its_last_checkpoint(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "calls.txt"
    monkeypatch.setenv("COUNTER", str(counter))
    counted = Counted()
    clock = Clock(now())
    async with Runpoint(
        AGENTS, database=database, schedule=False, host=PluginHost([counted])
    ) as rp:
        made = await driven(rp, clock).schedules.create(
            Schedule(
                schedule_id="retrying",
                name="r",
                agent_id="flaky",
                message="note Oslo",
                max_retries=2,
                retry_delay_seconds=30,
            )
        )
        fired = await rp.schedules.trigger(made.schedule_id, None)
        run = await until(rp, fired.run_id, RunStatus.ERROR)
        await rp.scheduler.run_due()
        assert counted.retried == 0, "not before its delay"
        clock.at = run.updated_at + 31
        await rp.scheduler.run_due()
        run = await until(rp, fired.run_id, RunStatus.COMPLETED)
        await rp.scheduler.run_due()
        [record] = await fired_runs(rp, made.schedule_id)
    assert counted.retried == 1 and record.attempt == 2 and record.settled
    assert run.content and "Oslo" in run.content
    assert counter.read_text().split() == ["Oslo"]  # its tool call was not run again


async def test_a_run_over_its_timeout_is_cancelled(rp: Runpoint) -> None:
    clock = Clock(now())
    made = await driven(rp, clock).schedules.create(
        Schedule(schedule_id="slow", name="s", agent_id="slow", message="go", timeout_seconds=60)
    )
    fired = await rp.schedules.trigger(made.schedule_id, "once")
    await until(rp, fired.run_id, RunStatus.RUNNING)
    await rp.scheduler.run_due()
    assert (await rp.storage.get_run(fired.run_id)).status is RunStatus.RUNNING  # type: ignore[union-attr]
    clock.at += 61
    await rp.scheduler.run_due()
    await until(rp, fired.run_id, RunStatus.CANCELLED)
    await rp.scheduler.run_due()
    [record] = await fired_runs(rp, made.schedule_id)
    assert record.settled


async def test_a_trigger_with_a_key_fires_once(rp: Runpoint) -> None:
    made = await rp.schedules.create(
        Schedule(schedule_id="t", name="t", agent_id="echo", message="go")
    )
    assert made.next_run_at is None  # on demand: no tick of its own
    first = await rp.schedules.trigger("t", "k1")
    again = await rp.schedules.trigger("t", "k1")
    other = await rp.schedules.trigger("t", "k2")
    assert first.run_id == again.run_id != other.run_id
    assert len(await fired_runs(rp, "t")) == 2
    await rp.schedules.update("t", {"enabled": False})
    with pytest.raises(Conflict, match="disabled"):
        await rp.schedules.trigger("t", "k3")


async def test_a_team_sees_and_fires_only_its_own_schedules(rp: Runpoint) -> None:
    with tenancy.acting_as(tenancy.Principal("red")):
        red = await rp.schedules.create(every(60))
    with tenancy.acting_as(tenancy.Principal("blue")):
        assert await rp.schedules.page(limit=10, offset=0) == []
        for attempt in (
            rp.schedules.get(red.schedule_id),
            rp.schedules.trigger(red.schedule_id, None),
            rp.schedules.update(red.schedule_id, {"name": "mine"}),
            rp.schedules.delete(red.schedule_id),
            rp.schedules.runs(red.schedule_id, limit=1, offset=0),
        ):
            with pytest.raises(NotFound):
                await attempt
    with tenancy.acting_as(tenancy.Principal("red")):
        fired = await rp.schedules.trigger(red.schedule_id, None)
        assert [s.schedule_id for s in await rp.schedules.page(limit=10, offset=0)] == [
            red.schedule_id
        ]
        run = await until(rp, fired.run_id, RunStatus.COMPLETED)
    assert run.team_id == "red"  # its runs are the team's


async def test_bad_input_names_the_field(rp: Runpoint) -> None:
    for fields, named in (
        ({"cron_expr": "every minute"}, "cron_expr"),
        ({"cron_expr": "61 * * * *"}, "cron_expr"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
        ({"agent_id": "nobody"}, "endpoint"),
        ({"model": "nobody:gpt"}, "payload.model"),
    ):
        with pytest.raises(InvalidArguments, match=named):
            await rp.schedules.create(msgspec.structs.replace(every(60), **fields))
    made = await rp.schedules.create(every(60))
    with pytest.raises(InvalidArguments, match="timezone"):
        await rp.schedules.update(made.schedule_id, {"timezone": "Nowhere"})


def test_ticks_follow_the_zones_daylight_saving_rules() -> None:
    berlin = Schedule(
        schedule_id="b",
        name="b",
        agent_id="echo",
        message="go",
        cron_expr="30 2 * * *",
        timezone="Europe/Berlin",
    )
    zone = ZoneInfo("Europe/Berlin")

    def ticks(after: datetime, n: int) -> list[datetime]:
        at, out = after.timestamp(), []
        for _ in range(n):
            at = berlin.next_tick(at)  # type: ignore[assignment]
            out.append(datetime.fromtimestamp(at, zone))
        return out

    # spring forward (02:00 -> 03:00 on 29 March): 02:30 does not exist; fired at 03:00
    spring = ticks(datetime(2026, 3, 28, 12, tzinfo=zone), 2)
    assert [(t.day, t.hour, t.minute) for t in spring] == [(29, 3, 0), (30, 2, 30)]
    # fall back (03:00 -> 02:00 on 25 October): 02:30 happens twice, an hour apart
    fall = ticks(datetime(2026, 10, 24, 12, tzinfo=zone), 3)
    assert fall[1].timestamp() - fall[0].timestamp() == 3600
    assert Counter(t.day for t in fall) == {25: 2, 26: 1}
