"""Runs by status, across a team's sessions (see runpoint.seams.jobs): the runs' status
column, their team the session's."""

from __future__ import annotations

from collections.abc import Collection

from sqlalchemy import func, or_, select

from runpoint.core.types import Run, RunStatus
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.run_rows import COLUMNS, decode_runs
from runpoint.plugins.sql.schema import runs, sessions

_TEAM_RUNS = runs.join(sessions, runs.c.session_id == sessions.c.session_id)


class SqlJobs:
    db: Database

    async def runs_by_status(
        self, team_id: str, statuses: Collection[RunStatus], *, limit: int, offset: int
    ) -> tuple[list[Run], int]:
        # equalities, not IN: a read is compiled once, without expanding parameters
        where = (sessions.c.team_id == team_id, or_(*(runs.c.status == s.value for s in statuses)))
        total = await self.db.read(select(func.count()).select_from(_TEAM_RUNS).where(*where))
        page = (
            select(*COLUMNS)
            .select_from(_TEAM_RUNS)
            .where(*where)
            .order_by(runs.c.seq.desc())
            .limit(limit)
            .offset(offset)
        )
        return decode_runs(await self.db.read(page), self.db.codec), int(total[0][0])

    async def count_runs_by_status(self, team_id: str) -> dict[RunStatus, int]:
        counts = (
            select(runs.c.status, func.count())
            .select_from(_TEAM_RUNS)
            .where(sessions.c.team_id == team_id)
            .group_by(runs.c.status)
        )
        return {RunStatus(status): int(n) for status, n in await self.db.read(counts)}
