"""`Storage` on SQLAlchemy Core with an async engine: SQLite (aiosqlite) or PostgreSQL
(asyncpg). One class per role implements its protocol (see runpoint.storage); the
dialect object they share says what differs between the two databases."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from runpoint.plugins.sql import migrate
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.events import SqlEvents
from runpoint.plugins.sql.idempotency import SqlIdempotencyKeys
from runpoint.plugins.sql.leases import SqlLeases
from runpoint.plugins.sql.postgresql import PostgreSQL
from runpoint.plugins.sql.runs import SqlRuns
from runpoint.plugins.sql.secrets import SqlSecrets
from runpoint.plugins.sql.session_checkpoints import SqlSessionCheckpoints
from runpoint.plugins.sql.sessions import SqlSessions
from runpoint.plugins.sql.sqlite import Sqlite
from runpoint.plugins.sql.transcripts import SqlTranscripts

_DIALECTS: dict[str, tuple[str, type[Database]]] = {
    "sqlite": ("sqlite+aiosqlite", Sqlite),
    "postgresql": ("postgresql+asyncpg", PostgreSQL),
}


class SqlStorage(
    SqlRuns,
    SqlTranscripts,
    SqlEvents,
    SqlSessions,
    SqlSessionCheckpoints,
    SqlLeases,
    SqlIdempotencyKeys,
    SqlSecrets,
):
    def __init__(self, url: str, **engine_options: Any) -> None:
        parsed = make_url(url)
        driver, dialect = _DIALECTS[parsed.get_backend_name()]
        if "+" not in parsed.drivername:
            parsed = parsed.set(drivername=driver)
        self.db = dialect(parsed, **engine_options)

    @property
    def engine(self) -> AsyncEngine:
        return self.db.engine

    async def open(self) -> None:
        await self.db.open()

    async def close(self) -> None:
        await self.db.close()

    async def pending_migrations(self) -> list[str]:
        return await migrate.pending(self.engine)
