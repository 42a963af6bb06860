"""A database as the role modules use it: reads, write transactions, and the few statements
whose SQL differs between the dialects, each said by its own module (sqlite.py,
postgresql.py) instead of branches in every role."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple

from sqlalchemy import Insert, Select, Table, insert
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from runpoint.core.group_commit import GroupCommit
from runpoint.core.sealing import Codec
from runpoint.core.types import Run
from runpoint.plugins.sql import migrate, team_keys
from runpoint.plugins.sql.appends import Append
from runpoint.plugins.sql.births import TABLES, Births
from runpoint.plugins.sql.compiled import compiled
from runpoint.plugins.sql.schema import NO_END

__all__ = ["NO_END", "Database", "Save"]


class Save(NamedTuple):
    """What one `save` writes, encoded: the run's state, its new messages' rows (index,
    role, document, how many it holds: see packs.py), its checkpoint (index, document),
    the side-effecting calls about to run and its events (seq, document)."""

    run: Run
    state: bytes
    messages: Sequence[tuple[int, str, bytes, int]]
    checkpoint: tuple[int, bytes] | None
    intents: Sequence[str]
    events: Sequence[tuple[int, bytes]]


class Database(abc.ABC):
    def __init__(self, url: URL, **engine_options: Any) -> None:
        self.url = url
        self.engine = create_async_engine(url, **engine_options)
        self.dialect = self.engine.dialect
        # single statements need no transaction: no BEGIN and COMMIT round trips
        self.autocommit = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self.appends = GroupCommit(self.append_events)
        self.codec = Codec()  # no keyring until one is given (`SqlStorage.seal_with`)
        # runs whose last save failed with its outcome unknown (a connection cut at its
        # commit may have written it): run id -> the revision it was saved at
        self.unsure: dict[str, int] = {}
        # runs in flight whose packing failed: run id -> where it began (packing.pack_settled)
        self.unpacked: dict[str, int] = {}

    async def open(self) -> None:
        await migrate.upgrade(self.engine)

    async def close(self) -> None:
        await self.engine.dispose()

    async def reclaim(self, pages: int) -> int:
        """Return free space to the file system, `pages` at most: the bytes returned
        (none here: PostgreSQL's autovacuum makes freed space reusable)."""
        return 0

    async def wipe(self) -> None:
        """Leave no old copy of deleted rows where this process can reach (SQLite's WAL);
        PostgreSQL keeps dead rows until vacuumed, and its WAL, out of reach."""
        return None

    async def read(self, statement: Select[Any], params: Mapping[str, Any] = {}) -> Sequence[Any]:
        """The rows of one read (`params`: values of its bind parameters), each a sequence
        of its values; with a keyring, the team keys their documents are sealed under
        held)."""
        read = compiled(statement, self.dialect)
        rows = await self.fetch(read.sql, read.parameters(params))
        await team_keys.load_of(self, rows, statement)  # a key another made, or erased
        return rows

    @abc.abstractmethod
    async def fetch(self, sql: str, parameters: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        """The rows of a read compiled for this dialect, sent on its driver outside any
        transaction: the statement sees all that was committed when it began (a cancel
        from another process included)."""

    def write(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """One write transaction."""
        return self.engine.begin()

    @abc.abstractmethod
    def locking(self, query: Select[Any]) -> Select[Any]:
        """`query`, holding the rows it reads until commit against other writers."""

    @abc.abstractmethod
    def insert_new(self, table: Table) -> Insert:
        """An INSERT into `table` that skips (reports no row for) a row whose key is taken."""

    @abc.abstractmethod
    def single_write(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """The connection for a write that PostgreSQL makes in one statement (a boundary,
        a birth): atomic on its own there, a transaction where it takes several."""

    async def insert_births(self, conn: AsyncConnection, births: Births) -> None:
        """Insert new sessions, their runs and the runs' input (see births.py)."""
        for table, rows in zip(TABLES, births, strict=True):
            if rows:
                await conn.execute(insert(table), rows)

    async def save(self, written: Save) -> bool | None:
        """`write_save` in a write of its own."""
        async with self.single_write() as conn:
            return await self.write_save(conn, written)

    async def save_births(self, births: Births) -> None:
        """`insert_births` in a write of its own."""
        async with self.single_write() as conn:
            await self.insert_births(conn, births)

    @abc.abstractmethod
    async def write_save(self, conn: AsyncConnection, written: Save) -> bool | None:
        """Write a boundary (see `Storage.save`) if the run's revision is still the one on
        `written.run`: the run's `cancel_requested` then, or None (nothing written).

        The boundary takes the next places of its session's event log: one per message,
        then one for itself (its status change, and its checkpoint if any). The cursor is
        taken first (the session's row, then the run's: the lock order of every session
        writer); the rest is written only if the run's row was."""

    @abc.abstractmethod
    async def append_events(self, appends: Sequence[Append]) -> Sequence[bool]:
        """Insert each append's event rows if its run's revision is still `run.revision`
        (a seq stored already stands), all in one write (see appends.py): whether each was
        (False: nothing of it written)."""
