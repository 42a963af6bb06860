"""`Storage` on SQLAlchemy Core with an async engine: SQLite (aiosqlite) or PostgreSQL
(asyncpg). One class per role implements its protocol (see runpoint.seams.storage); the
dialect object they share says what differs between the two databases."""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import delete, insert
from sqlalchemy.engine import URL, make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from runpoint.core.errors import StorageFull, Unavailable, needs_extra
from runpoint.plugins.sql import migrate, outages
from runpoint.plugins.sql.approvals import SqlApprovals
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.encryption import SqlEncryption
from runpoint.plugins.sql.events import SqlEvents
from runpoint.plugins.sql.idempotency import SqlIdempotencyKeys
from runpoint.plugins.sql.jobs import SqlJobs
from runpoint.plugins.sql.leases import SqlLeases
from runpoint.plugins.sql.retention import SqlRetention
from runpoint.plugins.sql.runs import SqlRuns
from runpoint.plugins.sql.schedules import SqlSchedules
from runpoint.plugins.sql.schema import secrets
from runpoint.plugins.sql.secrets import SqlSecrets
from runpoint.plugins.sql.session_checkpoints import SqlSessionCheckpoints
from runpoint.plugins.sql.sessions import SqlSessions
from runpoint.plugins.sql.team_erasure import SqlTeamErasure
from runpoint.plugins.sql.transcripts import SqlTranscripts

_PROBE = "readiness-probe"  # the row a readiness probe writes (a secret nobody asks for)


class SqlStorage(
    SqlRuns,
    SqlTranscripts,
    SqlEvents,
    SqlSessions,
    SqlSessionCheckpoints,
    SqlLeases,
    SqlIdempotencyKeys,
    SqlSecrets,
    SqlRetention,
    SqlApprovals,
    SqlJobs,
    SqlEncryption,
    SqlSchedules,
    SqlTeamErasure,
):
    def __init__(self, url: str, **engine_options: Any) -> None:
        self.db = _database(make_url(url), **engine_options)
        self._full = False  # a write failed for lack of space, and none has got through since

    @property
    def engine(self) -> AsyncEngine:
        return self.db.engine

    async def open(self) -> None:
        await self.db.open()
        await self.watch_encryption()

    async def close(self) -> None:
        await self.stop_watching()
        await self.db.close()

    async def pending_migrations(self) -> list[str]:
        return await migrate.pending(self.engine)

    def outage(self, exc: BaseException) -> Unavailable | None:
        found = outages.outage(exc)
        self._full = self._full or isinstance(found, StorageFull)
        return found

    async def probe(self) -> None:
        await self.get_session("readiness-probe")
        if self._full:  # the reads go on: only a write tells whether there is room again
            async with self.db.write() as conn:
                await conn.execute(delete(secrets).where(secrets.c.name == _PROBE))
                await conn.execute(insert(secrets).values(name=_PROBE, value=os.urandom(16)))
            self._full = False


def _database(url: URL, **engine_options: Any) -> Database:
    """The database a URL names, its dialect's module imported only then (SQLAlchemy's
    PostgreSQL dialect and asyncpg cost a SQLite server's start-up time)."""
    if url.get_backend_name() == "postgresql":
        with needs_extra("postgres", "a PostgreSQL database", "asyncpg"):
            from runpoint.plugins.sql.postgresql import PostgreSQL

            return PostgreSQL(_with_driver(url, "asyncpg"), **engine_options)
    from runpoint.plugins.sql.sqlite import Sqlite

    return Sqlite(_with_driver(url, "aiosqlite"), **engine_options)


def _with_driver(url: URL, driver: str) -> URL:
    """`url` with `driver` unless it names one (`postgresql+asyncpg://`)."""
    return url if "+" in url.drivername else url.set(drivername=f"{url.drivername}+{driver}")
