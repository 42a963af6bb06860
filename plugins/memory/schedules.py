"""Schedules and the records of the runs they fired."""

from __future__ import annotations

from runpoint.core.schedule import DONE, UNFINISHED, Schedule, ScheduleRun
from runpoint.plugins.memory.tables import Tables, copy


class MemorySchedules(Tables):
    async def put_schedule(self, schedule: Schedule) -> None:
        self._schedules[schedule.schedule_id] = copy(schedule)
        self._holds.pop(schedule.schedule_id, None)  # re-armed, perhaps: anyone may take it

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        found = self._schedules.get(schedule_id)
        return None if found is None else copy(found)

    async def list_schedules(self, *, team_id: str, limit: int, offset: int) -> list[Schedule]:
        mine = [s for s in self._schedules.values() if s.team_id == team_id]
        mine.sort(key=lambda s: (s.created_at, s.schedule_id))
        return [copy(s) for s in mine[offset : offset + limit]]

    async def delete_schedule(self, schedule_id: str) -> bool:
        if self._schedules.pop(schedule_id, None) is None:
            return False
        for key in [k for k in self._fired if k[0] == schedule_id]:
            del self._fired[key]
        return True

    async def claim_due(self, before: float, limit: int, until: float) -> list[Schedule]:
        due = [
            s
            for s in self._schedules.values()
            if s.enabled
            and s.next_run_at is not None
            and s.next_run_at <= before
            and self._holds.get(s.schedule_id, before) <= before
        ]
        due.sort(key=lambda s: (s.next_run_at or 0.0, s.schedule_id))
        self._holds |= {s.schedule_id: until for s in due[:limit]}
        return [copy(s) for s in due[:limit]]

    async def advance_schedule(self, schedule_id: str, tick: float, to: float | None) -> bool:
        found = self._schedules.get(schedule_id)
        if found is None or found.next_run_at != tick:
            return False
        found.next_run_at = to
        self._schedules[schedule_id] = found
        self._holds.pop(schedule_id, None)
        return True

    async def record_fired(self, fired: ScheduleRun) -> bool:
        if (fired.schedule_id, fired.tick) in self._fired:
            return False
        self._fired[fired.schedule_id, fired.tick] = copy(fired)
        return True

    async def update_fired(self, fired: ScheduleRun, attempt: int) -> bool:
        found = self._fired.get((fired.schedule_id, fired.tick))
        if found is None or found.attempt != attempt:
            return False
        self._fired[fired.schedule_id, fired.tick] = copy(fired)
        return True

    async def get_fired(self, schedule_id: str, run_id: str) -> ScheduleRun | None:
        for (of, _), fired in self._fired.items():
            if of == schedule_id and fired.run_id == run_id:
                return copy(fired)
        return None

    async def list_fired(self, schedule_id: str, *, limit: int, offset: int) -> list[ScheduleRun]:
        mine = [f for (of, _), f in self._fired.items() if of == schedule_id]
        mine.sort(key=lambda f: f.tick, reverse=True)
        return [copy(f) for f in mine[offset : offset + limit]]

    async def settle_done(self) -> int:
        done = 0
        for fired in self._fired.values():
            run = self._runs.get(fired.run_id)
            if not fired.settled and (run is None or run.status in DONE):
                fired.settled, done = True, done + 1
        return done

    async def unsettled_fired(self, before: float, limit: int) -> list[ScheduleRun]:
        def needs_a_look(fired: ScheduleRun) -> bool:
            run = self._runs.get(fired.run_id)
            ended = run is None or run.status not in UNFINISHED
            return ended or fired.deadline is None or fired.deadline <= before

        open_ = sorted(
            (f for f in self._fired.values() if not f.settled and needs_a_look(f)),
            key=lambda f: f.attempt_at,
        )
        return [copy(f) for f in open_[:limit]]
