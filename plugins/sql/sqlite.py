"""SQLite (aiosqlite, WAL): one writer at a time, reads inline on a connection of their own."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Sequence
from typing import Any

from sqlalchemy import Insert, Select, Table, bindparam, event, insert, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.errors import Unavailable
from runpoint.core.types import now
from runpoint.plugins.sql.appends import Append
from runpoint.plugins.sql.database import Database, Save
from runpoint.plugins.sql.one_hop import OneHopDbapi
from runpoint.plugins.sql.schema import (
    checkpoints,
    messages,
    run_events,
    runs,
    sessions,
    tool_calls,
)

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


class Sqlite(Database):
    def __init__(self, url: URL, **engine_options: Any) -> None:
        # each statement one trip to the connection's thread (see `one_hop`)
        super().__init__(url, module=OneHopDbapi(), **engine_options)
        event.listen(self.engine.sync_engine, "connect", _configure)
        # SQLite has one writer: queue this process's writers instead of waiting in SQLite
        self._write_lock = asyncio.Lock()
        self._waiting_alone = 0  # writers waiting for the lock to write alone
        # one body of a grouped write at a time (see `single_write`), and those waiting
        self._turn = asyncio.Lock()
        self._joining = 0
        self._group: _Group | None = None
        self._left: asyncio.Task[None] | None = None  # a group committed after its writes
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
                    await _take_back(conn, "ROLLBACK")
                    raise
                await conn.exec_driver_sql("COMMIT")
        finally:
            self._write_lock.release()

    def locking(self, query: Select[Any]) -> Select[Any]:
        return query  # BEGIN IMMEDIATE already serialises every writer

    def insert_new(self, table: Table) -> Insert:
        return sqlite.insert(table).on_conflict_do_nothing()

    @contextlib.asynccontextmanager
    async def single_write(self) -> AsyncIterator[AsyncConnection]:
        """A write that is statements only (a boundary, a birth, event appends: nothing in
        it waits for anything else), grouped: those that come while one is being written
        go in its transaction, each in a savepoint of its own (one that fails takes back
        its own statements only), and all return once it commits: a page that several of
        them changed is written once."""
        self._joining += 1
        try:
            await self._turn.acquire()
        except BaseException:  # gave up waiting: the group's last write may be done
            self._joining -= 1
            self._commit_if_left()
            raise
        self._joining -= 1
        try:
            group = self._group or await self._begin_group()
            try:  # whatever happens from here, the group is committed if this is its last
                await group.conn.exec_driver_sql("SAVEPOINT grouped")
                try:
                    yield group.conn
                except BaseException:
                    await _take_back(group.conn, "ROLLBACK TO grouped", "RELEASE grouped")
                    raise
                await group.conn.exec_driver_sql("RELEASE grouped")
            finally:
                group.writes += 1
                # the last of those that came meanwhile commits (sooner if one waits to
                # write alone: it is not kept waiting behind a stream of grouped writes; at
                # once if its connection was lost: nothing more can join it)
                if (
                    not self._joining
                    or self._waiting_alone
                    or group.writes >= _GROUP_LIMIT
                    or group.conn.invalidated
                ):
                    self._group = None
                    # whoever commits, the others learn how it went, even if it gives up
                    await asyncio.shield(self._commit(group))
        finally:
            self._turn.release()
        await group.committed

    def _commit_if_left(self) -> None:
        """Commit the open group if no write of it is under way and none waits to join."""
        if self._group is not None and not self._joining and not self._turn.locked():
            group, self._group = self._group, None
            self._left = asyncio.create_task(self._commit(group), name="sqlite group commit")

    async def _begin_group(self) -> _Group:
        await self._write_lock.acquire()
        try:
            conn = await self.engine.connect()
        except BaseException:
            self._write_lock.release()
            raise
        try:
            await conn.exec_driver_sql("BEGIN IMMEDIATE")
        except BaseException:
            await conn.close()
            self._write_lock.release()
            raise
        self._group = _Group(conn)
        return self._group

    async def _commit(self, group: _Group) -> None:
        """Commit `group`, and tell its writes how it went."""
        try:
            if group.conn.invalidated:  # its writes were taken back: they may be retried
                raise Unavailable("a write that shared its transaction was interrupted")
            await group.conn.exec_driver_sql("COMMIT")
        except Exception as error:
            group.committed.set_exception(error)
            with contextlib.suppress(Exception):
                await group.conn.exec_driver_sql("ROLLBACK")
        except BaseException:  # the loop is closing
            group.committed.cancel()
            raise
        else:
            group.committed.set_result(None)
        finally:
            await group.conn.close()
            self._write_lock.release()

    async def write_save(self, conn: AsyncConnection, written: Save) -> bool | None:
        run = written.run
        found = (
            await conn.execute(
                update(runs)
                .where(runs.c.run_id == run.run_id, runs.c.revision == run.revision)
                .values(
                    revision=run.revision + 1,
                    state=written.state,
                    lease_owner=run.lease_owner,
                    lease_expires_at=run.lease_expires_at,
                    recoveries=run.recoveries,
                )
                .returning(runs.c.cancel_requested, runs.c.status)
            )
        ).first()
        if found is None:
            return None
        cancel_requested, status = found
        # apart, and only if it changed (a few times a run): SQLite rewrites the index
        # entries of every column an UPDATE sets, whether its value changes or not
        if status != run.status.value:
            await conn.execute(
                update(runs).where(runs.c.run_id == run.run_id).values(status=run.status.value)
            )
        # the run's row is written under BEGIN IMMEDIATE: the session's may come second
        rows = written.messages
        cursor = await conn.scalar(
            update(sessions)
            .where(sessions.c.session_id == run.session_id)
            .values(event_seq=sessions.c.event_seq + len(rows) + 1)
            .returning(sessions.c.event_seq)
        )
        first = cursor - len(rows)
        if rows:
            await conn.execute(
                insert(messages),
                [
                    {"run_id": run.run_id, "idx": i, "role": r, "data": d, "event_seq": first + n}
                    for n, (i, r, d) in enumerate(rows)
                ],
            )
        if written.checkpoint is not None:
            index, data = written.checkpoint
            await conn.execute(  # the first checkpoint at an index stands
                sqlite.insert(checkpoints)
                .values(run_id=run.run_id, message_index=index, data=data, event_seq=cursor)
                .on_conflict_do_nothing()
            )
        if written.intents:
            started = now()
            await conn.execute(
                insert(tool_calls),
                [
                    {"run_id": run.run_id, "tool_call_id": i, "started_at": started}
                    for i in written.intents
                ],
            )
        await _insert_events(conn, run.run_id, written.events)
        return bool(cancel_requested)

    async def append_events(self, appends: Sequence[Append]) -> list[bool]:
        written = []
        async with self.single_write() as conn:
            for run, events in appends:
                revision = await conn.scalar(_REVISION, {"run": run.run_id})
                written.append(revision == run.revision)
                if written[-1]:
                    await _insert_events(conn, run.run_id, events)
        return written


_REVISION = select(runs.c.revision).where(runs.c.run_id == bindparam("run"))


# the most writes one transaction takes
_GROUP_LIMIT = 64


class _Group:
    """Grouped writes in one transaction (see `Sqlite.single_write`)."""

    def __init__(self, conn: AsyncConnection) -> None:
        self.conn = conn
        self.writes = 0
        self.committed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # a failure no write waits for (a cancelled one was the last) is no news to report
        self.committed.add_done_callback(lambda done: done.cancelled() or done.exception())


# on the driver: SQLAlchemy's executemany costs a hundred microseconds a row, a token's
# event a few (a seq stored already stands)
_INSERT_EVENTS = f"INSERT OR IGNORE INTO {run_events.name} (run_id, seq, data) VALUES (?, ?, ?)"


async def _insert_events(
    conn: AsyncConnection, run_id: str, events: Sequence[tuple[int, bytes]]
) -> None:
    if events:
        rows = [(run_id, seq, data) for seq, data in events]
        await conn.exec_driver_sql(_INSERT_EVENTS, rows)


async def _take_back(conn: AsyncConnection, *statements: str) -> None:
    """Take back a failed write with `statements`, unless its connection is gone: a
    statement interrupted (its task cancelled: a close) makes SQLAlchemy close the
    connection, and SQLite takes the transaction back with it. A statement sent then would
    fail, and its error replace the CancelledError (see runpoint.core.cancels)."""
    if not conn.invalidated:
        for statement in statements:
            await conn.exec_driver_sql(statement)


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
