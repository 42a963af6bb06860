"""PostgreSQL (asyncpg): reads on connections of their own (readers.py); rows locked by
the writers that read them; a boundary, and a session's birth with its runs, each in one
statement, and those of different runs that come together (a group commit: see
runpoint/group_commit.py) in one statement too, each answered for its own run."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, NamedTuple, TypeVar

from sqlalchemy import (
    CTE,
    BigInteger,
    Float,
    Insert,
    Integer,
    Select,
    String,
    Table,
    Text,
    any_,
    bindparam,
    cast,
    func,
    insert,
    literal_column,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import ARRAY, BYTEA
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.group_commit import GroupCommit
from runpoint.core.types import now
from runpoint.plugins.sql.appends import Append
from runpoint.plugins.sql.births import Births
from runpoint.plugins.sql.compiled import Compiled
from runpoint.plugins.sql.database import Database, Save
from runpoint.plugins.sql.readers import Readers
from runpoint.plugins.sql.schema import (
    PARTIAL_INDEXES,
    checkpoints,
    messages,
    run_events,
    run_reads,
    runs,
    sessions,
    tool_calls,
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
        given = engine_options.pop("connect_args", {})
        settings = _KEYED_PLANS | given.get("server_settings", {})
        connect_args = given | {"server_settings": settings}
        super().__init__(url, **engine_options, connect_args=connect_args)
        # reads connect as the engine does (its server settings, TLS): asyncpg takes what
        # SQLAlchemy's asyncpg dialect hands it, but for the dialect's own statement cache
        self._connect_args = {k: v for k, v in connect_args.items() if k not in _DIALECTS_OWN}
        self._readers = Readers(self._dsn, self._connect_args)
        self._saves: dict[_Parts, Compiled] = {}
        self._grouped = GroupCommit(self._save_group)
        self._born = GroupCommit(self._save_births)
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
        shape = _shape(births)
        if not any(shape):
            return
        if (statement := self._births.get(shape)) is None:
            statement = Compiled.of(_births(shape), self.dialect)
            self._births[shape] = statement
        values: dict[str, list[Any]] = {}
        for table, names, rows in zip(_BORN, shape, births, strict=True):
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
        values: dict[str, Any] = {"started_at": now()}
        for name in _BOUNDARY_COLUMNS + _ROW_COLUMNS:
            values[name] = []
        for n, written in enumerate(group, 1):
            run, rows, mark = written.run, written.messages, written.checkpoint
            columns = (
                run.run_id,
                run.revision,
                run.session_id,
                len(rows) + 1,
                run.status.value,
                written.state,
                run.lease_owner,
                run.lease_expires_at,
                run.recoveries,
            )
            for name, value in zip(_BOUNDARY_COLUMNS, columns, strict=True):
                values[name].append(value)
            # each message's place counted back from its boundary's, which is the last
            for place, (index, role, data) in zip(range(len(rows), 0, -1), rows, strict=True):
                _append(values, message_saves=n, message_indexes=index, roles=role)
                _append(values, documents=data, message_places_before=place)
            if mark is not None:
                _append(values, checkpoint_saves=n, checkpoint_indexes=mark[0])
                _append(values, checkpoint_documents=mark[1])
            for intent in written.intents:
                _append(values, intent_saves=n, intents=intent)
            for seq, data in written.events:
                _append(values, event_saves=n, event_seqs=seq, event_documents=data)
        parts = _Parts(*(bool(values[rows[0]]) for rows in _PARTS_ROWS))
        if (save := self._saves.get(parts)) is None:
            save = self._saves[parts] = Compiled.of(_save(parts), self.dialect)
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


# the parameters of a grouped boundary statement: one array per column of the boundaries
# (the run's row and the places it takes), one per column of each kind of row they write
_BOUNDARY_COLUMNS = (
    "run_ids",
    "revisions",
    "session_ids",
    "places",
    "statuses",
    "states",
    "lease_owners",
    "lease_expires_ats",
    "recoveries",
)
_PARTS_ROWS = (
    ("message_saves", "message_indexes", "roles", "documents", "message_places_before"),
    ("checkpoint_saves", "checkpoint_indexes", "checkpoint_documents"),
    ("intent_saves", "intents"),
    ("event_saves", "event_seqs", "event_documents"),
)
_ROW_COLUMNS = tuple(name for rows in _PARTS_ROWS for name in rows)


def _append(values: dict[str, list[Any]], **row: Any) -> None:
    for name, value in row.items():
        values[name].append(value)


class _Parts(NamedTuple):
    """Which rows a group of boundaries writes besides the runs': its statement has only
    their INSERTs (an empty one still costs the server its tables' locks, plan nodes and
    indexes)."""

    messages: bool
    checkpoints: bool
    intents: bool
    events: bool  # never before 0013 (no run_events): the run's input is written without


def _rows(name: str, *columns: tuple[str, Any]) -> Any:
    """The rows of a kind a group's boundaries write, from one array parameter per column
    (named as given), each with `n`, the place of its boundary in the group (from 1)."""
    arrays = [bindparam(f"{name}_saves", type_=ARRAY(BigInteger))]
    arrays += [bindparam(parameter, type_=ARRAY(kind)) for parameter, kind in columns]
    names = ["n"] + [parameter for parameter, _ in columns]
    return func.unnest(*arrays).table_valued(*names).render_derived(name)


def _save(parts: _Parts) -> Select[tuple[int, bool]]:
    """The statement of `_write_saves`: each boundary's places in its session's log
    are taken only if its run's revision matches, its run's row written only then, and its
    rows only with its run's; what each boundary has, numbered by its place in the group
    (`n`, from 1). The sessions' rows are locked first, then the runs', each in the order
    of their ids (as `append_events` locks the runs): grouped writers wait for each other
    in the same order, so they cannot deadlock."""
    given = func.unnest(
        bindparam("run_ids", type_=ARRAY(String)),
        bindparam("revisions", type_=ARRAY(Integer)),
        bindparam("session_ids", type_=ARRAY(Text)),
        bindparam("places", type_=ARRAY(BigInteger)),
        bindparam("statuses", type_=ARRAY(String)),
        bindparam("states", type_=ARRAY(BYTEA)),
        bindparam("lease_owners", type_=ARRAY(String)),
        bindparam("lease_expires_ats", type_=ARRAY(Float)),
        bindparam("recoveries", type_=ARRAY(Integer)),
    ).table_valued(
        "run_id",
        "revision",
        "session_id",
        "places",
        "status",
        "state",
        "lease_owner",
        "lease_expires_at",
        "recoveries",
        with_ordinality="n",
    )
    # read in the order of their runs' ids (see `writers`)
    derived = given.render_derived("b")
    boundaries = select(derived).order_by(derived.c.run_id).cte("boundaries")
    b = boundaries.c
    # of the boundaries whose run has their revision as the statement starts, the places
    # each session's later ones take after it (a run changed meanwhile leaves its unused)
    moving = (
        select(
            b.n,
            b.session_id,
            b.places,
            (
                func.sum(b.places).over(partition_by=b.session_id)
                - func.sum(b.places).over(partition_by=b.session_id, order_by=b.n)
            ).label("after"),
        )
        .join_from(boundaries, _current(b.run_id, b.revision), true())
        .cte("moving")
    )
    taken = (
        select(moving.c.session_id, func.sum(moving.c.places).label("places"))
        .group_by(moving.c.session_id)
        .subquery("taken")
    )
    cursors = (
        select(sessions.c.session_id, taken.c.places)
        .join_from(taken, sessions, sessions.c.session_id == taken.c.session_id)
        .order_by(sessions.c.session_id)
        .with_for_update(of=sessions, key_share=True)
        .cte("cursors")
    )
    log = (
        update(sessions)
        .where(sessions.c.session_id == cursors.c.session_id)
        .values(event_seq=sessions.c.event_seq + cursors.c.places)
        .returning(sessions.c.session_id, sessions.c.event_seq)
        .cte("log")
    )
    # every session's row is locked (its log's whole result is read once, first) before
    # any run's
    logged = select(func.array_agg(log.c.session_id)).scalar_subquery()
    locked = _current(b.run_id, b.revision, "NO KEY UPDATE")
    writers = (
        select(b.n, locked.c.run_id)
        .join_from(boundaries, locked, true())
        .where(b.session_id == any_(cast(logged, ARRAY(Text))))
        .cte("writers")
    )
    run = (
        update(runs)
        .where(runs.c.run_id == writers.c.run_id, writers.c.n == b.n)
        .values(
            status=b.status,
            revision=runs.c.revision + 1,
            state=b.state,
            lease_owner=b.lease_owner,
            lease_expires_at=b.lease_expires_at,
            recoveries=b.recoveries,
        )
        .returning(b.n, runs.c.run_id, runs.c.cancel_requested)
        .cte("run")
    )
    # each written boundary's place: the last of those it takes
    written = (
        select(run.c.n, run.c.run_id, (log.c.event_seq - moving.c.after).label("place"))
        .join_from(run, moving, moving.c.n == run.c.n)
        .join(log, log.c.session_id == moving.c.session_id)
        .cte("written")
    )
    writes: list[Any] = []
    if parts.messages:
        writes.append(_new_messages(written).cte("new_messages"))
    if parts.checkpoints:
        writes.append(_new_checkpoints(written).cte("new_checkpoints"))
    if parts.intents:
        writes.append(_intents(written).cte("intents"))
    if parts.events:
        writes.append(_new_events(written).cte("new_events"))
    return select(run.c.n, run.c.cancel_requested).add_cte(*writes)


_Lock = Literal["SHARE", "NO KEY UPDATE"]


def _current(run_id: Any, revision: Any, lock: _Lock | None = None) -> Any:
    """The id of the run of `run_id` if it has `revision` (none else), locked against
    other writers if `lock` says how (PostgreSQL's row lock of that name), in the order
    of the rows of the query it is joined to: looked up by its key for each of them. (The
    LIMIT keeps the planner from turning it into a join that it may plan as a scan of the
    table: a plan made while the table was small is kept for the connection, so it would
    scan the table at each call as it grows.)"""
    found = (
        select(runs.c.run_id)
        .where(runs.c.run_id == run_id, runs.c.revision == revision)
        .limit(literal_column("1"))
    )
    if lock is not None:
        found = found.with_for_update(read=lock == "SHARE", key_share=lock == "NO KEY UPDATE")
    return found.lateral()


def _new_messages(written: CTE) -> Insert:
    """The messages of the written boundaries, in the places they took."""
    new = _rows(
        "message",
        ("message_indexes", Integer),
        ("roles", Text),
        ("documents", BYTEA),
        ("message_places_before", BigInteger),
    )
    return insert(messages).from_select(
        ["run_id", "idx", "role", "data", "event_seq"],
        select(
            written.c.run_id,
            new.c.message_indexes,
            new.c.roles,
            new.c.documents,
            written.c.place - new.c.message_places_before,
        ).join_from(new, written, new.c.n == written.c.n),
    )


def _new_checkpoints(written: CTE) -> Insert:
    """The checkpoints of the written boundaries, in their boundary's place; the first at
    an index stands."""
    new = _rows("checkpoint", ("checkpoint_indexes", Integer), ("checkpoint_documents", BYTEA))
    return (
        postgresql.insert(checkpoints)
        .from_select(
            ["run_id", "message_index", "data", "event_seq"],
            select(
                written.c.run_id,
                new.c.checkpoint_indexes,
                new.c.checkpoint_documents,
                written.c.place,
            ).join_from(new, written, new.c.n == written.c.n),
        )
        .on_conflict_do_nothing()
    )


def _intents(written: CTE) -> Insert:
    """The side-effecting calls of the written boundaries, started at `started_at`."""
    new = _rows("intent", ("intents", Text))
    return insert(tool_calls).from_select(
        ["run_id", "tool_call_id", "started_at"],
        select(written.c.run_id, new.c.intents, bindparam("started_at", type_=Float)).join_from(
            new, written, new.c.n == written.c.n
        ),
    )


def _new_events(written: CTE) -> Insert:
    """The event rows of the written boundaries; a seq stored already stands."""
    new = _rows("event", ("event_seqs", Integer), ("event_documents", BYTEA))
    return _insert_events(
        select(written.c.run_id, new.c.event_seqs, new.c.event_documents).join_from(
            new, written, new.c.n == written.c.n
        )
    )


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
    appends = select(given).order_by(given.c.run_id).cte("appends")
    locked = _current(appends.c.run_id, appends.c.revision, "SHARE")
    writers = select(appends.c.n, locked.c.run_id).join_from(appends, locked, true()).cte("writers")
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
_BORN = (sessions, runs, messages, run_reads)
# the columns a birth writes in each: those its rows give (none: no rows for the table)
_Shape = tuple[tuple[str, ...], ...]


def _shape(births: Births) -> _Shape:
    return tuple(tuple(rows[0]) if rows else () for rows in births)


def _births(shape: _Shape) -> Insert:
    """A birth's statement: each table's rows as one array parameter per column, named
    `<table>_<column>`, inserted in their order (in which runs take their `seq`)."""
    inserts: list[Insert] = []
    for table, names in zip(_BORN, shape, strict=True):
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
