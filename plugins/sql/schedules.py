"""Schedules and the records of the runs they fired."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import msgspec
from sqlalchemy import and_, bindparam, delete, or_, select, update

from runpoint.core.schedule import UNFINISHED, Schedule, ScheduleRun
from runpoint.core.sealing import Codec, readable
from runpoint.core.types import RunStatus
from runpoint.plugins.sql import team_keys
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.documents import document
from runpoint.plugins.sql.schema import runs, schedule_runs, schedules

_decode_schedule = msgspec.json.Decoder(Schedule).decode
_decode_fired = msgspec.json.Decoder(ScheduleRun).decode
_s, _r = schedules.c, schedule_runs.c
_SCHEDULE = (_s.schedule_id, _s.enabled, _s.next_run_at, _s.data)
_GET = select(*_SCHEDULE).where(_s.schedule_id == bindparam("id"))
_TEAM = (
    select(*_SCHEDULE)
    .where(_s.team_id == bindparam("team"))
    .order_by(_s.created_at, _s.schedule_id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
# due and not held: PostgreSQL skips the rows another process is taking right now
_DUE = (
    select(_s.schedule_id)
    .where(
        _s.next_run_at <= bindparam("before"),
        _s.enabled,
        or_(_s.claimed_until.is_(None), _s.claimed_until <= bindparam("before")),
    )
    .order_by(_s.next_run_at, _s.schedule_id)
    .limit(bindparam("limit"))
    .with_for_update(skip_locked=True)
)
_CLAIM = (
    update(schedules)
    .where(_s.schedule_id.in_(_DUE.scalar_subquery()))
    .values(claimed_until=bindparam("until"))
    .returning(*_SCHEDULE)
)
_FIRED_ROW = (_r.data, _r.settled)
_FIRED = select(*_FIRED_ROW).where(_r.schedule_id == bindparam("id"), _r.run_id == bindparam("run"))
_FIRED_PAGE = (
    select(*_FIRED_ROW)
    .where(_r.schedule_id == bindparam("id"))
    .order_by(_r.tick.desc())
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
# (no IN: a compiled read takes no expanding parameter)
_ENDED = or_(runs.c.status.is_(None), and_(*(runs.c.status != s.value for s in UNFINISHED)))
# a run that may yet need a look: unfinished, or failed (a retry, perhaps)
_OPEN = select(runs.c.run_id).where(
    runs.c.run_id == _r.run_id,
    or_(*(runs.c.status == s.value for s in (*UNFINISHED, RunStatus.ERROR))),
)
_SETTLE_DONE = update(schedule_runs).where(~_r.settled, ~_OPEN.exists()).values(settled=True)
_UNSETTLED = (
    select(*_FIRED_ROW)
    .select_from(schedule_runs.outerjoin(runs, runs.c.run_id == _r.run_id))
    .where(~_r.settled, or_(_ENDED, _r.deadline.is_(None), _r.deadline <= bindparam("before")))
    .order_by(_r.attempt_at)
    .limit(bindparam("limit"))
)


class SqlSchedules:
    db: Database

    async def put_schedule(self, schedule: Schedule) -> None:
        await team_keys.hold(self.db, schedule.team_id)
        row = {
            "team_id": schedule.team_id,
            "created_at": schedule.created_at,
            "enabled": schedule.enabled,
            "next_run_at": schedule.next_run_at,
            "claimed_until": None,  # re-armed, perhaps: any process may take it now
            "data": self.db.codec.seal(
                document(schedule),
                schedules.name,
                "data",
                schedule.schedule_id,
                team=schedule.team_id,
            ),
        }
        async with self.db.write() as conn:
            inserted = await conn.execute(
                self.db.insert_new(schedules).values(schedule_id=schedule.schedule_id, **row)
            )
            if inserted.rowcount != 1:
                await conn.execute(
                    update(schedules).where(_s.schedule_id == schedule.schedule_id).values(row)
                )

    async def get_schedule(self, schedule_id: str) -> Schedule | None:
        rows = await self.db.read(_GET, {"id": schedule_id})
        return _schedule(self.db.codec, rows[0]) if rows else None

    async def list_schedules(self, *, team_id: str, limit: int, offset: int) -> list[Schedule]:
        page = {"team": team_id, "limit": limit, "offset": offset}
        return [_schedule(self.db.codec, row) for row in await self.db.read(_TEAM, page)]

    async def delete_schedule(self, schedule_id: str) -> bool:
        async with self.db.write() as conn:
            await conn.execute(delete(schedule_runs).where(_r.schedule_id == schedule_id))
            gone = await conn.execute(delete(schedules).where(_s.schedule_id == schedule_id))
        return gone.rowcount == 1

    async def claim_due(self, before: float, limit: int, until: float) -> list[Schedule]:
        taking = {"before": before, "limit": limit, "until": until}
        async with self.db.single_write() as conn:  # one statement
            taken = (await conn.execute(_CLAIM, taking)).all()
        due = sorted(taken, key=lambda row: (row[2], row[0]))  # RETURNING keeps no order
        return readable(due, partial(_schedule, self.db.codec))

    async def advance_schedule(self, schedule_id: str, tick: float, to: float | None) -> bool:
        async with self.db.single_write() as conn:  # one statement
            moved = await conn.execute(
                update(schedules)
                .where(_s.schedule_id == schedule_id, _s.next_run_at == tick)
                .values(next_run_at=to, claimed_until=None)
            )
        return moved.rowcount == 1

    async def record_fired(self, fired: ScheduleRun) -> bool:
        async with self.db.single_write() as conn:  # one statement
            inserted = await conn.execute(
                self.db.insert_new(schedule_runs).values(
                    schedule_id=fired.schedule_id, tick=fired.tick, **_fired_row(fired)
                )
            )
        return inserted.rowcount == 1

    async def update_fired(self, fired: ScheduleRun, attempt: int) -> bool:
        async with self.db.single_write() as conn:  # one statement
            updated = await conn.execute(
                update(schedule_runs)
                .where(
                    _r.schedule_id == fired.schedule_id,
                    _r.tick == fired.tick,
                    _r.attempt == attempt,
                )
                .values(_fired_row(fired))
            )
        return updated.rowcount == 1

    async def get_fired(self, schedule_id: str, run_id: str) -> ScheduleRun | None:
        rows = await self.db.read(_FIRED, {"id": schedule_id, "run": run_id})
        return _fired(rows[0]) if rows else None

    async def list_fired(self, schedule_id: str, *, limit: int, offset: int) -> list[ScheduleRun]:
        page = {"id": schedule_id, "limit": limit, "offset": offset}
        return [_fired(row) for row in await self.db.read(_FIRED_PAGE, page)]

    async def settle_done(self) -> int:
        async with self.db.single_write() as conn:  # one statement
            return (await conn.execute(_SETTLE_DONE)).rowcount

    async def unsettled_fired(self, before: float, limit: int) -> list[ScheduleRun]:
        found = await self.db.read(_UNSETTLED, {"before": before, "limit": limit})
        return [_fired(row) for row in found]


def _schedule(codec: Codec, row: Sequence[Any]) -> Schedule:
    """A schedule from its document, with the columns the loop moves on by itself."""
    schedule_id, enabled, at, data = row
    opened = codec.open(data, schedules.name, "data", schedule_id)
    return msgspec.structs.replace(_decode_schedule(opened), enabled=bool(enabled), next_run_at=at)


def _fired(row: Sequence[Any]) -> ScheduleRun:
    """A record from its document, settled as its column says (`settle_done` sets it)."""
    data, settled = row
    return msgspec.structs.replace(_decode_fired(data), settled=bool(settled))


def _fired_row(fired: ScheduleRun) -> dict[str, Any]:
    return {
        "run_id": fired.run_id,
        "attempt": fired.attempt,
        "attempt_at": fired.attempt_at,
        "settled": fired.settled,
        "deadline": fired.deadline,
        "data": document(fired),
    }
