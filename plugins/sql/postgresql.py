"""PostgreSQL (asyncpg): reads on connections of their own (readers.py); rows locked by
the writers that read them; a boundary, and a session's birth with its runs, each in one
statement, and those of different runs that come together (a group commit: see
runpoint/core/group_commit.py) in one statement too, each answered for its own run (the
statements of those: postgresql_saves.py and postgresql_appends.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import (
    Insert,
    Select,
    Table,
    bindparam,
    func,
    insert,
    select,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine
from sqlalchemy.pool import NullPool

from runpoint.core.group_commit import GroupCommit
from runpoint.plugins.sql import migrate, postgresql_appends, postgresql_saves
from runpoint.plugins.sql.appends import Append
from runpoint.plugins.sql.births import TABLES, Births
from runpoint.plugins.sql.compiled import Compiled
from runpoint.plugins.sql.database import Database, Save
from runpoint.plugins.sql.outages import statement_timeout
from runpoint.plugins.sql.readers import Readers
from runpoint.plugins.sql.schema import (
    PARTIAL_INDEXES,
)

# each partial index has the condition on PostgreSQL that schema.py gives it on SQLite
for _index in PARTIAL_INDEXES:
    _index.dialect_kwargs["postgresql_where"] = _index.dialect_kwargs["sqlite_where"]


# connect_args that SQLAlchemy's asyncpg dialect takes for itself, not asyncpg.connect
_DIALECTS_OWN = {
    "async_creator_fn",
    "prepared_statement_cache_size",
    "prepared_statement_name_func",
}

# seconds a connection may take to open, or to be had from the pool: a server that cannot
# be reached is an outage (503) soon, not a request hanging for asyncpg's 60 s
CONNECT_TIMEOUT = 5.0

Item = TypeVar("Item")
Answer = TypeVar("Answer")


# Every statement finds its rows by key (partial indexes are matched by their literals), so
# one plan per connection serves any values: else the server plans a statement over an
# array parameter anew at each call (its length changes the estimates, so the plan cache
# keeps judging a custom plan cheaper). A connection's plan is made at its first call,
# often while the tables are nearly empty and not yet analysed, and kept until they are:
# a scan of a table joined to the given rows, cheapest then, would be the plan at every
# call as the table grows. Scans and hash or merge joins are only the last resort.
_KEYED_PLANS = {
    "plan_cache_mode": "force_generic_plan",
    "enable_seqscan": "off",
    "enable_hashjoin": "off",
    "enable_mergejoin": "off",
}


class PostgreSQL(Database):
    def __init__(self, url: URL, **engine_options: Any) -> None:
        url, command_timeout = statement_timeout(url)
        given = engine_options.pop("connect_args", {})
        settings = _KEYED_PLANS | given.get("server_settings", {})
        timeouts = {"timeout": CONNECT_TIMEOUT, "command_timeout": command_timeout}
        connect_args = timeouts | given | {"server_settings": settings}
        engine_options.setdefault("pool_timeout", CONNECT_TIMEOUT)
        super().__init__(url, **engine_options, connect_args=connect_args)
        # reads connect as the engine does (its server settings, TLS): asyncpg takes what
        # SQLAlchemy's asyncpg dialect hands it, but for the dialect's own statement cache
        self._connect_args = {k: v for k, v in connect_args.items() if k not in _DIALECTS_OWN}
        self._readers = Readers(self._dsn, self._connect_args)
        self._saves: dict[postgresql_saves.Parts, Compiled] = {}
        self._grouped = GroupCommit(self._save_group)
        self._born = GroupCommit(self._save_births)
        self._append_events = Compiled.of(postgresql_appends.statement(), self.dialect)
        self._births: dict[_Shape, Compiled] = {}

    async def open(self) -> None:
        # a migration may take longer than any request's statement (an index on a large
        # table): on an engine of its own, without the statement timeout
        if await migrate.pending(self.engine):
            unbounded = self._connect_args | {"command_timeout": None}
            engine = create_async_engine(self.url, connect_args=unbounded, poolclass=NullPool)
            try:
                await migrate.upgrade(engine)
            finally:
                await engine.dispose()

    @property
    def _dsn(self) -> str:
        return self.url.set(drivername="postgresql").render_as_string(hide_password=False)

    async def close(self) -> None:
        # a new one, if reopened
        readers, self._readers = self._readers, Readers(self._dsn, self._connect_args)
        await readers.close()
        await super().close()

    async def fetch(self, sql: str, parameters: tuple[Any, ...]) -> Sequence[Sequence[Any]]:
        return await self._readers.fetch(sql, parameters)

    def locking(self, query: Select[Any]) -> Select[Any]:
        return query.with_for_update()

    def insert_new(self, table: Table) -> Insert:
        return postgresql.insert(table).on_conflict_do_nothing()

    def single_write(self) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        # one statement: atomic without a transaction of its own (no BEGIN, no COMMIT)
        return self.autocommit.connect()

    async def insert_births(self, conn: AsyncConnection, births: Births) -> None:
        """Every row in one statement: one round trip, atomic without BEGIN."""
        shape = _shape(births)
        if not any(shape):
            return
        if (statement := self._births.get(shape)) is None:
            statement = Compiled.of(_births(shape), self.dialect)
            self._births[shape] = statement
        values: dict[str, list[Any]] = {}
        for table, names, rows in zip(TABLES, shape, births, strict=True):
            for name in names:
                values[f"{table.name}_{name}"] = [row[name] for row in rows]
        await conn.exec_driver_sql(statement.sql, statement.parameters(values))

    async def save_births(self, births: Births) -> None:
        await self._born.submit(births)

    async def _save_births(self, group: Sequence[Births]) -> list[Exception | None]:
        """Births that came together: those whose rows have the same columns (most) in one
        statement."""
        shapes: dict[_Shape, list[int]] = {}
        for n, births in enumerate(group):
            shapes.setdefault(_shape(births), []).append(n)
        answers: list[Exception | None] = [None] * len(group)
        for places in shapes.values():
            found = await self._together([group[n] for n in places], self._insert_births)
            for n, answer in zip(places, found, strict=True):
                answers[n] = answer
        return answers

    async def _insert_births(self, conn: AsyncConnection, group: Sequence[Births]) -> list[None]:
        """Births of the same columns in the statement of their rows together."""
        together = Births([], [], [], [])
        for births in group:
            for rows, more in zip(together, births, strict=True):
                rows += more
        await self.insert_births(conn, together)
        return [None] * len(group)

    async def save(self, written: Save) -> bool | None:
        return await self._grouped.submit(written)

    async def write_save(self, conn: AsyncConnection, written: Save) -> bool | None:
        (cancel_requested,) = await self._write_saves(conn, [written])
        return cancel_requested

    async def _save_group(self, group: Sequence[Save]) -> list[bool | Exception | None]:
        return await self._together(group, self._write_saves)

    async def _together(
        self,
        group: Sequence[Item],
        write: Callable[[AsyncConnection, Sequence[Item]], Awaitable[Sequence[Answer]]],
    ) -> list[Answer | Exception]:
        """`write` of the writes of `group` that came together, in one statement; if it
        fails (taking back all it wrote), each in a statement of its own, so that only a
        failing one fails (its error is its answer)."""
        try:
            async with self.single_write() as conn:
                return list(await write(conn, group))
        except DBAPIError as error:
            if len(group) == 1 or error.connection_invalidated:
                raise
        answers: list[Answer | Exception] = []
        for item in group:
            try:
                async with self.single_write() as conn:
                    answers += await write(conn, [item])
            except DBAPIError as error:
                answers.append(error)
        return answers

    async def _write_saves(self, conn: AsyncConnection, group: Sequence[Save]) -> list[bool | None]:
        """The boundaries in one statement (one round trip, atomic without BEGIN), each
        written only if its run's revision is the one it has: each one's run's
        `cancel_requested`, or None (nothing of it written)."""
        parts, values = postgresql_saves.parameters(group)
        if (save := self._saves.get(parts)) is None:
            save = self._saves[parts] = Compiled.of(postgresql_saves.statement(parts), self.dialect)
        saved = await conn.exec_driver_sql(save.sql, save.parameters(values))
        answers = {row["n"]: row["cancel_requested"] for row in saved.mappings()}
        return [answers.get(n) for n in range(1, len(group) + 1)]

    async def append_events(self, appends: Sequence[Append]) -> list[bool]:
        """One statement: each append's rows go in only while its run's row, locked against
        a writer that would claim it meanwhile, has the append's revision."""
        values = {
            "run_ids": [run.run_id for run, _ in appends],
            "revisions": [run.revision for run, _ in appends],
            "event_appends": [n for n, (_, events) in enumerate(appends, 1) for _ in events],
            "event_seqs": [seq for _, events in appends for seq, _ in events],
            "event_documents": [data for _, events in appends for _, data in events],
        }
        async with self.single_write() as conn:
            found = await conn.exec_driver_sql(
                self._append_events.sql, self._append_events.parameters(values)
            )
            written = set(found.scalars())
        return [n in written for n in range(1, len(appends) + 1)]


# the tables a birth writes, in the order of `Births`
# the columns a birth writes in each: those its rows give (none: no rows for the table)
_Shape = tuple[tuple[str, ...], ...]


def _shape(births: Births) -> _Shape:
    return tuple(tuple(rows[0]) if rows else () for rows in births)


def _births(shape: _Shape) -> Insert:
    """A birth's statement: each table's rows as one array parameter per column, named
    `<table>_<column>`, inserted in their order (in which runs take their `seq`)."""
    inserts: list[Insert] = []
    for table, names in zip(TABLES, shape, strict=True):
        if not names:
            continue
        columns = [table.c[name] for name in names]
        arrays = [bindparam(f"{table.name}_{c.name}", type_=ARRAY(c.type)) for c in columns]
        rows = (
            func.unnest(*arrays)
            .table_valued(*names, with_ordinality="n")
            .render_derived(f"new_{table.name}")
        )
        values = [rows.c[c.name] for c in columns]
        inserts.append(insert(table).from_select(names, select(*values).order_by(rows.c.n)))
    *first, last = inserts  # the others go first, as parts of the last
    return last.add_cte(*(i.cte(f"born_{i.table.name}") for i in first))
