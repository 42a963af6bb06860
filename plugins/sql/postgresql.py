"""PostgreSQL (asyncpg): reads on connections of their own (readers.py); rows locked by
the writers that read them; a boundary, and a session's birth with its runs, each in one
statement."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any, NamedTuple

from sqlalchemy import (
    CTE,
    BigInteger,
    BindParameter,
    Column,
    Float,
    Insert,
    Integer,
    Select,
    String,
    Table,
    Text,
    bindparam,
    cast,
    exists,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA, JSONB
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.plugins.sql.appends import Append
from runpoint.plugins.sql.births import Births
from runpoint.plugins.sql.compiled import Compiled
from runpoint.plugins.sql.database import Boundary, Database
from runpoint.plugins.sql.readers import Readers
from runpoint.plugins.sql.schema import (
    PARTIAL_INDEXES,
    Document,
    checkpoints,
    messages,
    run_events,
    runs,
    sessions,
    tool_calls,
)
from runpoint.types import now

# each partial index has the condition on PostgreSQL that schema.py gives it on SQLite
for _index in PARTIAL_INDEXES:
    _index.dialect_kwargs["postgresql_where"] = _index.dialect_kwargs["sqlite_where"]


# connect_args that SQLAlchemy's asyncpg dialect takes for itself, not asyncpg.connect
_DIALECTS_OWN = {
    "async_creator_fn",
    "prepared_statement_cache_size",
    "prepared_statement_name_func",
}


def _identity(value: Any) -> Any:
    return value


class PostgreSQL(Database):
    def __init__(self, url: URL, **engine_options: Any) -> None:
        # documents are already JSON: hand them to JSONB and back untouched
        untouched = {"json_serializer": _identity, "json_deserializer": _identity}
        # Every statement finds its rows by key (partial indexes are matched by their
        # literals), so one plan per connection serves any values: else the server plans
        # a statement over an array parameter anew at each call (its length changes the
        # estimates, so the plan cache keeps judging a custom plan cheaper).
        given = engine_options.pop("connect_args", {})
        settings = {"plan_cache_mode": "force_generic_plan"} | given.get("server_settings", {})
        connect_args = given | {"server_settings": settings}
        super().__init__(url, **(untouched | engine_options), connect_args=connect_args)
        # reads connect as the engine does (its server settings, TLS): asyncpg takes what
        # SQLAlchemy's asyncpg dialect hands it, but for the dialect's own statement cache
        self._connect_args = {k: v for k, v in connect_args.items() if k not in _DIALECTS_OWN}
        self._readers = Readers(self._dsn, self._connect_args)
        self._saves: dict[_Parts, Compiled] = {}
        self._append_events = Compiled.of(_append_events(), self.dialect)
        self._births: dict[_Shape, Compiled] = {}

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
        shape: _Shape = tuple(tuple(rows[0]) if rows else () for rows in births)
        if not any(shape):
            return
        if (statement := self._births.get(shape)) is None:
            statement = Compiled.of(_births(shape), self.dialect)
            self._births[shape] = statement
        values: dict[str, list[Any]] = {}
        for table, names, rows in zip(_BORN, shape, births, strict=True):
            for name in names:
                document = _is_document(table.c[name])
                given = [row[name].decode() if document else row[name] for row in rows]
                values[f"{table.name}_{name}"] = given
        await conn.exec_driver_sql(statement.sql, statement.parameters(values))

    async def write_boundary(self, conn: AsyncConnection, boundary: Boundary) -> bool | None:
        """The whole boundary in one statement: one round trip, atomic without BEGIN."""
        run, rows, mark = boundary.run, boundary.messages, boundary.checkpoint
        values = {
            "run_id": run.run_id,
            "revision": run.revision,
            "session_id": run.session_id,
            "places": len(rows) + 1,
            "status": run.status.value,
            "state": boundary.state.decode(),
            "lease_owner": run.lease_owner,
            "lease_expires_at": run.lease_expires_at,
            "recoveries": run.recoveries,
            "indexes": [i for i, _, _ in rows],
            "roles": [r for _, r, _ in rows],
            "documents": [d.decode() for _, _, d in rows],
            "checkpoint_index": mark[0] if mark else None,
            "checkpoint_document": mark[1].decode() if mark else None,
            "intents": list(boundary.intents),
            "started_at": now(),
            "event_seqs": [seq for seq, _ in boundary.events],
            "event_documents": [data for _, data in boundary.events],
        }
        parts = _Parts(bool(rows), bool(mark), bool(boundary.intents), bool(boundary.events))
        if (save := self._saves.get(parts)) is None:
            save = self._saves[parts] = Compiled.of(_save(parts), self.dialect)
        saved = await conn.exec_driver_sql(save.sql, save.parameters(values))
        cancel_requested: bool | None = saved.scalar()
        return cancel_requested

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
        async with self.autocommit.connect() as conn:
            found = await conn.exec_driver_sql(
                self._append_events.sql, self._append_events.parameters(values)
            )
            written = set(found.scalars())
        return [n in written for n in range(1, len(appends) + 1)]


class _Parts(NamedTuple):
    """Which rows a boundary writes besides the run's: its statement has only their INSERTs
    (an empty one still costs the server its tables' locks, plan nodes and indexes)."""

    messages: bool
    checkpoint: bool
    intents: bool
    events: bool  # never before 0013 (no run_events): the run's input is written without


def _save(parts: _Parts) -> Select[tuple[bool]]:
    """`save`'s statement (see `Database.write_boundary`): the log's places are taken only
    if the run's revision matches, the run's row only then, the rows only with the run's."""
    run_id = bindparam("run_id", type_=String)
    revision = bindparam("revision", type_=Integer)
    places = bindparam("places", type_=BigInteger)
    same_revision = (runs.c.run_id == run_id) & (runs.c.revision == revision)
    log = (
        update(sessions)
        .where(sessions.c.session_id == bindparam("session_id"), exists().where(same_revision))
        .values(event_seq=sessions.c.event_seq + places)
        .returning(sessions.c.event_seq)
        .cte("log")
    )
    run = (
        update(runs)
        .where(same_revision, exists(select(log.c.event_seq)))
        .values(
            status=bindparam("status"),
            revision=runs.c.revision + 1,
            state=cast(bindparam("state", type_=Text), JSONB),
            lease_owner=bindparam("lease_owner"),
            lease_expires_at=bindparam("lease_expires_at"),
            recoveries=bindparam("recoveries"),
        )
        .returning(runs.c.run_id, runs.c.cancel_requested)
        .cte("run")
    )
    writes: list[Any] = []
    if parts.messages:
        writes.append(_new_messages(run, log, places).cte("new_messages"))
    if parts.checkpoint:
        writes.append(_new_checkpoint(run, log).cte("new_checkpoint"))
    if parts.intents:
        writes.append(_intents(run).cte("intents"))
    if parts.events:
        writes.append(_new_events(run.c.run_id).cte("new_events"))
    return select(run.c.cancel_requested).add_cte(*writes)


def _new_messages(run: CTE, log: CTE, places: BindParameter[int]) -> Insert:
    """The rows of `indexes`, `roles` and `documents`, in the log's places they took."""
    new = (
        func.unnest(
            bindparam("indexes", type_=ARRAY(Integer)),
            bindparam("roles", type_=ARRAY(Text)),
            bindparam("documents", type_=ARRAY(Text)),
        )
        .table_valued("idx", "role", "data", with_ordinality="n")
        .render_derived("m")
    )
    return insert(messages).from_select(
        ["run_id", "idx", "role", "data", "event_seq"],
        select(
            run.c.run_id,
            new.c.idx,
            new.c.role,
            cast(new.c.data, JSONB),
            log.c.event_seq - places + new.c.n,
        ),
    )


def _new_checkpoint(run: CTE, log: CTE) -> Insert:
    """The checkpoint of `checkpoint_index` and `checkpoint_document`, in the boundary's
    place; the first at an index stands."""
    document = cast(bindparam("checkpoint_document", type_=Text), JSONB)
    index = bindparam("checkpoint_index", type_=Integer)
    return (
        postgresql.insert(checkpoints)
        .from_select(
            ["run_id", "message_index", "data", "event_seq"],
            select(run.c.run_id, index, document, log.c.event_seq),
        )
        .on_conflict_do_nothing()
    )


def _intents(run: CTE) -> Insert:
    """The side-effecting calls of `intents`, started at `started_at`."""
    intent = (
        func.unnest(bindparam("intents", type_=ARRAY(Text))).table_valued("id").render_derived("t")
    )
    return insert(tool_calls).from_select(
        ["run_id", "tool_call_id", "started_at"],
        select(run.c.run_id, intent.c.id, bindparam("started_at", type_=Float)),
    )


def _new_events(run_id: Any) -> Insert:
    """The event rows of `event_seqs` and `event_documents`, for the run of `run_id` (a
    column of a CTE: none if it has no row); a seq stored already stands."""
    new = (
        func.unnest(
            bindparam("event_seqs", type_=ARRAY(Integer)),
            bindparam("event_documents", type_=ARRAY(BYTEA)),
        )
        .table_valued("seq", "data")
        .render_derived("e")
    )
    return _insert_events(select(run_id, new.c.seq, new.c.data))


def _insert_events(rows: Select[Any]) -> Insert:
    """Event rows (run_id, seq, data); a seq stored already stands."""
    return (
        postgresql.insert(run_events)
        .from_select(["run_id", "seq", "data"], rows)
        .on_conflict_do_nothing()
    )


def _append_events() -> Select[tuple[int]]:
    """`append_events`' statement: the places (from 1) of the appends whose run has their
    revision, each of whose rows (`event_appends` says whose, by place) are written; the
    runs' rows locked in the order of their ids, as every such statement takes them."""
    given = (
        func.unnest(
            bindparam("run_ids", type_=ARRAY(String)),
            bindparam("revisions", type_=ARRAY(Integer)),
        )
        .table_valued("run_id", "revision", with_ordinality="n")
        .render_derived("w")
    )
    writers = (
        select(given.c.n, runs.c.run_id)
        .join_from(
            given, runs, (runs.c.run_id == given.c.run_id) & (runs.c.revision == given.c.revision)
        )
        .order_by(runs.c.run_id)
        .with_for_update(read=True, of=runs)
        .cte("writers")
    )
    new = (
        func.unnest(
            bindparam("event_appends", type_=ARRAY(BigInteger)),
            bindparam("event_seqs", type_=ARRAY(Integer)),
            bindparam("event_documents", type_=ARRAY(BYTEA)),
        )
        .table_valued("n", "seq", "data")
        .render_derived("e")
    )
    rows = select(writers.c.run_id, new.c.seq, new.c.data).join_from(
        new, writers, new.c.n == writers.c.n
    )
    return select(writers.c.n).add_cte(_insert_events(rows).cte("new_events"))


# the tables a birth writes, in the order of `Births`
_BORN = (sessions, runs, messages)
# the columns a birth writes in each: those its rows give (none: no rows for the table)
_Shape = tuple[tuple[str, ...], ...]


def _births(shape: _Shape) -> Insert:
    """A birth's statement: each table's rows as one array parameter per column, named
    `<table>_<column>`, inserted in their order (in which runs take their `seq`)."""
    inserts: list[Insert] = []
    for table, names in zip(_BORN, shape, strict=True):
        if not names:
            continue
        columns = [table.c[name] for name in names]
        arrays = [
            bindparam(f"{table.name}_{c.name}", type_=ARRAY(Text if _is_document(c) else c.type))
            for c in columns
        ]
        rows = (
            func.unnest(*arrays)
            .table_valued(*names, with_ordinality="n")
            .render_derived(f"new_{table.name}")
        )
        values = [
            cast(rows.c[c.name], JSONB) if _is_document(c) else rows.c[c.name] for c in columns
        ]
        inserts.append(insert(table).from_select(names, select(*values).order_by(rows.c.n)))
    *first, last = inserts  # the others go first, as parts of the last
    return last.add_cte(*(i.cte(f"born_{i.table.name}") for i in first))


def _is_document(column: Column[Any]) -> bool:
    return isinstance(column.type, Document)
