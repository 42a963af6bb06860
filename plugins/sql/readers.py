"""PostgreSQL's reads: single statements, each on an asyncpg connection kept for reads.

A read is one statement outside any transaction, so the connection it takes needs no BEGIN,
ROLLBACK or reset around it: it is taken from a list and put back. Through a pool the same
read paid for its machinery on every checkout (SQLAlchemy's events, its greenlet bridge and
result rows; asyncpg's pool its reset query, a round trip): a run's row by its id cost the
process 290 to 450 us of CPU, for 30 to 50 us on the connection itself (docs/http.md,
Performance)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

# the most reads under way at once (each a short statement), the others waiting for one to
# end: a process holds at most this many connections for reads, besides the engine's pool
SIZE = 5


class Readers:
    def __init__(self, dsn: str, connect_args: Mapping[str, Any], size: int = SIZE) -> None:
        self.dsn = dsn
        self.connect_args = connect_args
        self._idle: list[asyncpg.Connection] = []
        self._taken = asyncio.Semaphore(size)
        self._closed = False

    async def fetch(self, sql: str, parameters: Sequence[Any]) -> list[asyncpg.Record]:
        async with self._taken:
            conn = await self._take()
            try:
                rows: list[asyncpg.Record] = await conn.fetch(sql, *parameters)
            except BaseException:
                conn.terminate()  # whatever state the error left it in, a new one replaces it
                raise
            if self._closed:
                await conn.close()
            else:
                self._idle.append(conn)
            return rows

    async def _take(self) -> asyncpg.Connection:
        """An idle connection, but for those the server closed meanwhile (a restart, an
        administrator's pg_terminate_backend), else a new one."""
        while self._idle:
            if not (conn := self._idle.pop()).is_closed():
                return conn
        return await asyncpg.connect(self.dsn, **self.connect_args)

    async def close(self) -> None:
        """Close the idle connections, and each in use when its read ends: for good."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.close()
