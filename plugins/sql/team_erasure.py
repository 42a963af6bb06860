"""Erasing a team (see runpoint.seams.storage.ErasesTeams): its key deleted at once, then
its rows made before, a batch of sessions at a time (each batch a transaction that takes
its sessions' rows first, as every writer of their runs does)."""

from __future__ import annotations

from sqlalchemy import delete, exists, false, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.types import now
from runpoint.plugins.sql import team_keys
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.erase import captures, delete_sessions, erase
from runpoint.plugins.sql.locks import lock_session
from runpoint.plugins.sql.schema import (
    approvals,
    runs,
    schedule_runs,
    schedules,
    sessions,
    team_erasures,
)
from runpoint.plugins.sql.schema import team_keys as keys

_e = team_erasures.c
_PENDING = select(_e.team_id, _e.erased_at).where(_e.removed == false()).limit(1)


class SqlTeamErasure:
    db: Database

    async def erase_team(self, team: str) -> bool:
        async with self.db.write() as conn:
            # overwritten, then deleted: no copy left in the page where it was
            wiped = await conn.execute(
                update(keys).where(keys.c.team_id == team).values(wrapped=b"\0" * 64)
            )
            await conn.execute(delete(keys).where(keys.c.team_id == team))
            held = [select(t.c.team_id).where(t.c.team_id == team) for t in (sessions, schedules)]
            if not wiped.rowcount and not await conn.scalar(select(exists(held[0].union(held[1])))):
                return False
            row = {"team_id": team, "erased_at": now(), "removed": False}
            if not (await conn.execute(self.db.insert_new(team_erasures).values(row))).rowcount:
                await conn.execute(update(team_erasures).where(_e.team_id == team).values(row))
        team_keys.forget(self.db, [team])
        await self.db.wipe()
        return True

    async def remove_erased(self, batch: int) -> int | None:
        for team, erased_at in await self.db.read(_PENDING):
            of_team = (sessions.c.team_id == team) & (sessions.c.created_at <= erased_at)
            found = select(sessions.c.session_id).where(of_team).order_by(sessions.c.session_id)
            async with self.db.write() as conn:
                session_ids = list((await conn.scalars(found.limit(batch))).all())
                if not session_ids:  # the sessions done: the rest, and the erasure is done
                    await _remove_the_rest(conn, team, erased_at)
                    return 0
                for session_id in session_ids:
                    await lock_session(self.db, conn, session_id)
                of_them = select(runs.c.run_id).where(runs.c.session_id.in_(session_ids))
                run_ids = list((await conn.scalars(of_them)).all())
                await erase(
                    conn, self.db.codec, [*run_ids, *await captures(conn, session_ids)], run_ids
                )
                return await delete_sessions(conn, session_ids)
        return None


async def _remove_the_rest(conn: AsyncConnection, team: str, erased_at: float) -> None:
    """The team's approvals and schedules made before it was erased (its runs' approvals
    went with them), then the erasure is recorded done."""
    made_before = (approvals.c.team_id == team) & (approvals.c.created_at <= erased_at)
    await conn.execute(delete(approvals).where(made_before))
    s = schedules.c
    theirs = select(s.schedule_id).where(s.team_id == team, s.created_at <= erased_at)
    await conn.execute(delete(schedule_runs).where(schedule_runs.c.schedule_id.in_(theirs)))
    await conn.execute(delete(schedules).where(s.schedule_id.in_(theirs)))
    await conn.execute(update(team_erasures).where(_e.team_id == team).values(removed=True))
