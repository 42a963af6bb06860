"""SQLite (aiosqlite, WAL): one writer at a time, reads inline on a connection of their own."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Sequence
from typing import Any

from sqlalchemy import Insert, Select, Table, event
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.plugins.sql import sqlite_saves
from runpoint.plugins.sql.appends import Append
from runpoint.plugins.sql.births import Births
from runpoint.plugins.sql.database import Database, Save
from runpoint.plugins.sql.one_hop import OneHopDbapi
from runpoint.plugins.sql.sqlite_groups import GroupedWrites
from runpoint.plugins.sql.sqlite_saves import driver_of

_INCREMENTAL = 2  # PRAGMA auto_vacuum's INCREMENTAL
_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    # A commit is in the WAL file when it returns, so a process that dies loses nothing;
    # the WAL is flushed to the disk at each checkpoint, not at each commit, so a crash of
    # the machine or a power loss can undo the last commits, acknowledged or not. FULL would
    # flush at each commit: an fsync each, and in this process's count 4 KiB more written
    # per commit (the WAL's last page, written again after each flush).
    "PRAGMA synchronous=NORMAL",
    "PRAGMA busy_timeout=10000",
    # A grouped write's savepoint keeps the pages it changes in a sub-journal: in memory,
    # not in a temporary file that the OS is asked to write (7% more bytes for small runs)
    "PRAGMA temp_store=MEMORY",
    # what a delete frees is zeroed in the pages it writes anyway (no more I/O): an erased
    # team's key leaves no copy in the file's free space (plugins/sql/team_erasure.py)
    "PRAGMA secure_delete=FAST",
)


RECLAIM_STEP = 250  # free pages returned under the write lock at a time (1 MB of 4 KiB)


class Sqlite(GroupedWrites, Database):
    def __init__(self, url: URL, **engine_options: Any) -> None:
        # each statement one trip to the connection's thread (see `one_hop`)
        Database.__init__(self, url, module=OneHopDbapi(), **engine_options)
        event.listen(self.engine.sync_engine, "connect", _configure)
        # SQLite has one writer: queue this process's writers instead of waiting in SQLite
        self._write_lock = asyncio.Lock()
        self._waiting_alone = 0  # writers waiting for the lock to write alone
        GroupedWrites.__init__(self)
        self._reader: sqlite3.Connection | None = None

    async def open(self) -> None:
        await super().open()
        if self.url.database not in (None, "", ":memory:"):
            await asyncio.to_thread(_incremental, self.url.database)
            self._reader = sqlite3.connect(
                self.url.database, check_same_thread=False, isolation_level=None
            )
            _configure(self._reader, None)
            self._reader.execute("PRAGMA query_only=ON")

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        await super().close()

    async def reclaim(self, pages: int) -> int:
        """Return up to `pages` free pages to the file system, `RECLAIM_STEP` at a time
        (this process's writers wait for a step, as for any write), then checkpoint the
        WAL into the file: the bytes of the pages returned."""
        if self.url.database in (None, "", ":memory:"):
            return 0
        freed = 0
        for step in range(0, pages, RECLAIM_STEP):  # writers go on between steps
            async with self._write_lock:
                size = min(RECLAIM_STEP, pages - step)
                returned, left = await asyncio.to_thread(_reclaim, self.url.database, size)
            freed += returned
            if not left:
                break
        # the file shrinks once the WAL is copied back into it: a checkpoint that lets
        # writers go on meanwhile (the WAL file is then reused from its start)
        await asyncio.to_thread(_checkpoint, self.url.database)
        return freed

    async def wipe(self) -> None:
        """Copy the WAL into the file and empty it: the pages a delete changed replace
        their old versions in both."""
        if self.url.database not in (None, "", ":memory:"):
            await asyncio.to_thread(_checkpoint, self.url.database, "TRUNCATE")

    async def fetch(self, sql: str, parameters: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        """Reads run inline: an indexed read takes microseconds, far less than handing it
        to a thread and back (see docs/architecture.md, "Measured")."""
        if self._reader is None:  # in memory: the database is the engine's connection's
            async with self.autocommit.connect() as conn:
                return (await conn.exec_driver_sql(sql, parameters)).all()
        return self._reader.execute(sql, parameters).fetchall()

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """Takes the database's write lock at BEGIN, so a transaction that reads before it
        writes cannot be refused half-way."""
        self._waiting_alone += 1
        try:
            await self._write_lock.acquire()
        finally:
            self._waiting_alone -= 1
        try:
            async with self.engine.connect() as conn:
                await conn.exec_driver_sql("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    # unless a statement interrupted (a close cancelled it) cost the
                    # connection: SQLAlchemy closes it, SQLite takes the transaction back
                    # with it, and a ROLLBACK's error would replace the CancelledError
                    # (see runpoint.core.cancels)
                    if not conn.invalidated:
                        await conn.exec_driver_sql("ROLLBACK")
                    raise
                await conn.exec_driver_sql("COMMIT")
        finally:
            self._write_lock.release()

    def locking(self, query: Select[Any]) -> Select[Any]:
        return query  # BEGIN IMMEDIATE already serialises every writer

    def insert_new(self, table: Table) -> Insert:
        return sqlite.insert(table).on_conflict_do_nothing()

    async def save(self, written: Save) -> bool | None:
        return await self.grouped(sqlite_saves.save(written))

    async def save_births(self, births: Births) -> None:
        await self.grouped(sqlite_saves.births(births))

    async def write_save(self, conn: AsyncConnection, written: Save) -> bool | None:
        """In a caller's transaction: its statements in one trip all the same."""
        body = sqlite_saves.save(written)
        return await sqlite_saves.in_thread(conn, await driver_of(conn), body)

    async def append_events(self, appends: Sequence[Append]) -> list[bool]:
        return await self.grouped(sqlite_saves.append(appends))


def _incremental(path: str) -> None:
    """Make a database made before migration 0015 return free pages to the file system:
    a one-off VACUUM (which copies it whole) with auto_vacuum INCREMENTAL."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        if conn.execute("PRAGMA auto_vacuum").fetchone()[0] != _INCREMENTAL:
            conn.execute("PRAGMA busy_timeout=10000")
            conn.execute(f"PRAGMA auto_vacuum={_INCREMENTAL}")
            conn.execute("VACUUM")


def _reclaim(path: str, pages: int) -> tuple[int, int]:
    """Return up to `pages` free pages: the bytes returned, and the free pages left."""
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA busy_timeout=10000")
        size, free = (
            conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_size", "freelist_count")
        )
        # a script: the pragma runs to its end (a statement would free one page a step)
        conn.executescript(f"PRAGMA incremental_vacuum({int(pages)});")
        left = conn.execute("PRAGMA freelist_count").fetchone()[0]
    return int((free - left) * size), int(left)


def _checkpoint(path: str, mode: str = "PASSIVE") -> None:
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA busy_timeout=10000")
        conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchall()


def _configure(dbapi_connection: Any, _record: Any) -> None:
    # Transactions are begun by hand (see `Sqlite.write`); reads need none.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    for pragma in _PRAGMAS:
        cursor.execute(pragma)
    cursor.close()
