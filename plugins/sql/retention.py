"""Retention: bounded reads of finished runs, and removals that respect lineage."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence

from sqlalchemy import bindparam, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.types import Run
from runpoint.plugins.sql import packing, team_keys
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.erase import (
    captures,
    delete_events,
    delete_sessions,
    erase,
    read_ranges,
)
from runpoint.plugins.sql.events import inline_checkpoints
from runpoint.plugins.sql.locks import lock_session
from runpoint.plugins.sql.run_rows import COLUMNS, decode_runs, readable_runs
from runpoint.plugins.sql.schema import run_events, runs, sessions
from runpoint.seams.retention import FINISHED, Removed, removable

_FINISHED = [s.value for s in FINISHED]
# literals, as the status index's condition (see schema.py): a compiled read takes no list
_ENDED = text(f"status IN ({', '.join(repr(s) for s in _FINISHED)})")
_FINISHED_RUNS = (
    select(runs.c.seq, *COLUMNS)
    .where(runs.c.seq > bindparam("after"), _ENDED)
    .order_by(runs.c.seq)
    .limit(bindparam("limit"))
)


class _DryRun(Exception):
    """Raised to roll a dry run's transaction back."""


# runs a removal takes (see `RetentionStore`): SQLite's write lock holds up every writer
_PER_TRANSACTION = {"sqlite": 5, "postgresql": 50}


class SqlRetention:
    db: Database

    @property
    def removals_per_transaction(self) -> int:
        return _PER_TRANSACTION.get(self.db.dialect.name, 5)

    async def finished_runs(self, after: int, limit: int) -> tuple[list[Run], int]:
        rows = await self.db.read(_FINISHED_RUNS, {"after": after, "limit": limit})
        found = readable_runs([row[1:] for row in rows], self.db.codec)
        return found, rows[-1][0] if len(rows) == limit else 0

    async def remove_runs(self, run_ids: Sequence[str], *, dry_run: bool = False) -> Removed:
        if not run_ids:
            return Removed()
        async with self._writing(dry_run) as (conn, removed):
            of_them = select(runs.c.session_id).where(runs.c.run_id.in_(run_ids))
            session_ids = sorted(set((await conn.scalars(of_them)).all()))
            # their sessions' rows first, as every writer of their runs (none waits on us)
            locked = (
                select(sessions.c.session_id, sessions.c.locked)
                .where(sessions.c.session_id.in_(session_ids))
                .order_by(sessions.c.session_id)  # one order for every writer: no deadlock
            )
            open_ids = [
                s for s, lock in await conn.execute(self.db.locking(locked)) if lock is None
            ]
            rows = await conn.execute(select(*COLUMNS).where(runs.c.session_id.in_(open_ids)))
            every = decode_runs(rows.all(), self.db.codec)
            doomed = removable(every, set(run_ids))
            emptied = sorted(
                {r.session_id for r in every}
                - {r.session_id for r in every if r.run_id not in doomed}
            )
            captured = await captures(conn, emptied)
            removed += await erase(conn, self.db.codec, [*doomed, *captured], doomed)
            removed.runs, removed.run_ids = len(doomed), sorted(doomed)
            removed.sessions = await delete_sessions(conn, emptied)
        return removed

    async def trim_checkpoints(self, run_id: str, keep: int, *, dry_run: bool = False) -> Removed:
        # the key is held before the write: its first use may write it
        team = await team_keys.hold_for(self.db, team_keys.OF_RUN, run_id) or ""
        async with self._writing(dry_run) as (conn, removed):
            of_run = select(runs.c.session_id, runs.c.status).where(runs.c.run_id == run_id)
            found = (await conn.execute(of_run)).first()
            if found is None or found.status not in _FINISHED:
                return removed
            # as a fork of the run holds it: none is born between reading and deleting
            await lock_session(self.db, conn, found.session_id)
            marks = [f.index for f in await packing.run_checkpoints(conn, self.db.codec, run_id)]
            read = (await read_ranges(conn, [run_id])).get(run_id, [])
            kept = set(marks[-max(keep, 1) :])  # the end is the last
            doomed = [
                m for m in marks if m not in kept and not any(lo < m <= hi for lo, hi in read)
            ]
            if doomed:
                await inline_checkpoints(conn, self.db.codec, run_id, team, doomed)
                removed.checkpoints, removed.size = await packing.delete_checkpoints(
                    conn, self.db.codec, run_id, doomed
                )
        return removed

    async def drop_events(self, run_ids: Sequence[str], *, dry_run: bool = False) -> Removed:
        finished = select(runs.c.run_id).where(
            runs.c.run_id.in_(run_ids), runs.c.status.in_(_FINISHED)
        )
        async with self._writing(dry_run) as (conn, removed):
            removed += await delete_events(conn, run_events.c.run_id.in_(finished))
        return removed

    async def reclaim_space(self, pages: int) -> int:
        return await self.db.reclaim(pages)

    @contextlib.asynccontextmanager
    async def _writing(self, dry_run: bool) -> AsyncIterator[tuple[AsyncConnection, Removed]]:
        """A write transaction and what it removed; rolled back if `dry_run`."""
        removed = Removed()
        try:
            async with self.db.write() as conn:
                yield conn, removed
                if dry_run:
                    raise _DryRun
        except _DryRun:
            pass
