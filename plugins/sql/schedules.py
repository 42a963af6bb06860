"""Schedules and the records of the runs they fired."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import msgspec
from sqlalchemy import bindparam, delete, select, update

from runpoint.core.schedule import Schedule, ScheduleRun
from runpoint.plugins.sql import team_keys
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.documents import document
from runpoint.plugins.sql.schema import schedule_runs, schedules
from runpoint.plugins.sql.sealing import Codec, readable

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
_DUE = (
    select(*_SCHEDULE)
    .where(_s.next_run_at <= bindparam("before"), _s.enabled)
    .order_by(_s.next_run_at, _s.schedule_id)
    .limit(bindparam("limit"))
)
_FIRED = select(_r.data).where(_r.schedule_id == bindparam("id"), _r.run_id == bindparam("run"))
_FIRED_PAGE = (
    select(_r.data)
    .where(_r.schedule_id == bindparam("id"))
    .order_by(_r.tick.desc())
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)
_UNSETTLED = select(_r.data).where(~_r.settled).order_by(_r.attempt_at).limit(bindparam("limit"))


class SqlSchedules:
    db: Database

    async def put_schedule(self, schedule: Schedule) -> None:
        await team_keys.hold(self.db, schedule.team_id)
        row = {
            "team_id": schedule.team_id,
            "created_at": schedule.created_at,
            "enabled": schedule.enabled,
            "next_run_at": schedule.next_run_at,
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

    async def due_schedules(self, before: float, limit: int) -> list[Schedule]:
        due = await self.db.read(_DUE, {"before": before, "limit": limit})
        return readable(due, partial(_schedule, self.db.codec))

    async def advance_schedule(self, schedule_id: str, tick: float, to: float | None) -> bool:
        async with self.db.write() as conn:
            moved = await conn.execute(
                update(schedules)
                .where(_s.schedule_id == schedule_id, _s.next_run_at == tick)
                .values(next_run_at=to)
            )
        return moved.rowcount == 1

    async def record_fired(self, fired: ScheduleRun) -> bool:
        async with self.db.write() as conn:
            inserted = await conn.execute(
                self.db.insert_new(schedule_runs).values(
                    schedule_id=fired.schedule_id, tick=fired.tick, **_fired_row(fired)
                )
            )
        return inserted.rowcount == 1

    async def update_fired(self, fired: ScheduleRun, attempt: int) -> bool:
        async with self.db.write() as conn:
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
        return _decode_fired(rows[0][0]) if rows else None

    async def list_fired(self, schedule_id: str, *, limit: int, offset: int) -> list[ScheduleRun]:
        page = {"id": schedule_id, "limit": limit, "offset": offset}
        return [_decode_fired(row[0]) for row in await self.db.read(_FIRED_PAGE, page)]

    async def unsettled_fired(self, limit: int) -> list[ScheduleRun]:
        return [_decode_fired(row[0]) for row in await self.db.read(_UNSETTLED, {"limit": limit})]


def _schedule(codec: Codec, row: Sequence[Any]) -> Schedule:
    """A schedule from its document, with the columns the loop moves on by itself."""
    schedule_id, enabled, at, data = row
    opened = codec.open(data, schedules.name, "data", schedule_id)
    return msgspec.structs.replace(_decode_schedule(opened), enabled=bool(enabled), next_run_at=at)


def _fired_row(fired: ScheduleRun) -> dict[str, Any]:
    return {
        "run_id": fired.run_id,
        "attempt": fired.attempt,
        "attempt_at": fired.attempt_at,
        "settled": fired.settled,
        "data": document(fired),
    }
