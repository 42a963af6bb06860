"""The storage seam's schedules role: schedules, and the record of the runs they fired.

Which process fires a tick is not decided here: a tick is claimed as an Idempotency-Key
(`IdempotencyKeyStore`, key "schedule <id> <tick>"), answered by the write that makes
its run, so each tick makes one run whichever processes race for it, and a claim whose
process died runs out for another (see `runpoint.durable.schedules`). This role keeps
where each schedule is (`next_run_at`, moved on by compare-and-set) and what it fired.
"""

from __future__ import annotations

from typing import Protocol

from runpoint.core.schedule import Schedule, ScheduleRun


class ScheduleStore(Protocol):
    async def put_schedule(self, schedule: Schedule) -> None:
        """Insert the schedule, or replace the one with its id (every field)."""

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        """The schedule as last written; None if unknown."""

    async def list_schedules(self, *, team_id: str, limit: int, offset: int) -> list[Schedule]:
        """A team's schedules, oldest (`created_at`) first, ties by schedule_id."""

    async def delete_schedule(self, schedule_id: str) -> bool:
        """Delete the schedule and its records (not its runs); False if unknown."""

    async def claim_due(self, before: float, limit: int, until: float) -> list[Schedule]:
        """Take the enabled schedules whose `next_run_at` is at or before `before` and
        that no caller holds past `before`, earliest first, `limit` at most: each is held
        until `until` (or until it is moved on), and concurrent callers get none in
        common. (An optimisation: a tick's key, not this hold, makes it fire once.)"""

    async def advance_schedule(self, schedule_id: str, tick: float, to: float | None) -> bool:
        """Set `next_run_at` to `to` if it is still `tick` (one mover per tick), and let
        go of its hold; False (nothing written) otherwise."""

    async def record_fired(self, fired: ScheduleRun) -> bool:
        """Insert the record of a fired run unless its (schedule_id, tick) has one: True
        if this call inserted it."""

    async def update_fired(self, fired: ScheduleRun, attempt: int) -> bool:
        """Replace the record of (schedule_id, tick) with `fired` if its `attempt` is still
        `attempt` (one writer per attempt); False (nothing written) otherwise."""

    async def get_fired(self, schedule_id: str, run_id: str) -> ScheduleRun | None:
        """The record of the run `run_id` fired by the schedule; None if there is none."""

    async def list_fired(self, schedule_id: str, *, limit: int, offset: int) -> list[ScheduleRun]:
        """The schedule's records, newest tick first."""

    async def settle_done(self) -> int:
        """Mark settled, at once, the records whose run is done (its status in `DONE`) or
        gone: nothing more is done to them. How many."""

    async def unsettled_fired(self, before: float, limit: int) -> list[ScheduleRun]:
        """Records not settled yet that need a look (a retry or a timeout, perhaps): their
        run has ended or is gone, or their `deadline` is at or before `before`; oldest
        attempt first, `limit` at most."""
