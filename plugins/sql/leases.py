"""Leases: who executes the runs in flight until when, and cancel requests for them."""

from __future__ import annotations

import functools
from collections.abc import Collection

from sqlalchemy import ColumnElement, Select, bindparam, exists, literal_column, or_, select, update

from runpoint.core.types import Run, RunStatus
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.locks import IN_FLIGHT
from runpoint.plugins.sql.run_rows import COLUMNS, readable_runs
from runpoint.plugins.sql.schema import RUNS_IN_FLIGHT, runs, sessions

# how many expired runs one call returns: the lease watch polls again for more
_BATCH = 20
_crew = runs.alias("crew")
# a crew run that may still delegate: its member runs are its to resume (literals: the
# statement is compiled once, see `Database.read`)
_GOING: list[ColumnElement[str]] = [
    literal_column(f"'{s}'") for s in (*IN_FLIGHT, RunStatus.PAUSED.value)
]


class SqlLeases:
    db: Database

    async def request_cancel(self, run_id: str) -> bool:
        async with self.db.write() as conn:
            flagged = await conn.execute(
                update(runs)
                .where(runs.c.run_id == run_id, runs.c.status.in_(IN_FLIGHT))
                .values(cancel_requested=True)
            )
            return bool(flagged.rowcount)

    async def renew_leases(self, owner: str, run_ids: Collection[str], until: float) -> None:
        async with self.db.write() as conn:
            await conn.execute(
                update(runs)
                .where(
                    runs.c.lease_owner == owner,
                    runs.c.run_id.in_(list(run_ids)),
                    runs.c.status.in_(IN_FLIGHT),
                )
                .values(lease_expires_at=until)
            )

    async def expired_runs(self, before: float, agent_ids: Collection[str]) -> list[Run]:
        if not agent_ids:
            return []
        values = {"before": before} | {f"agent{i}": a for i, a in enumerate(sorted(agent_ids))}
        return readable_runs(await self.db.read(_expired(len(agent_ids)), values), self.db.codec)


@functools.lru_cache(maxsize=16)
def _expired(agents: int) -> Select[tuple[object, ...]]:
    """In-flight runs (found by status) of some agents whose lease ran out, but members'
    runs whose crew run goes on (their leaders resume them). A run's agent is its session's
    (a session belongs to one agent), a column of `sessions`."""
    return (
        select(*COLUMNS)
        .join(sessions, sessions.c.session_id == runs.c.session_id)
        .where(
            RUNS_IN_FLIGHT,
            or_(
                runs.c.parent_run_id.is_(None),
                ~exists().where(_crew.c.run_id == runs.c.parent_run_id, _crew.c.status.in_(_GOING)),
            ),
            or_(runs.c.lease_expires_at.is_(None), runs.c.lease_expires_at < bindparam("before")),
            sessions.c.agent_id.in_([bindparam(f"agent{i}") for i in range(agents)]),
        )
        .order_by(runs.c.lease_expires_at)
        .limit(_BATCH)
    )
