"""SQLite's boundary and event appends as plain functions of a `sqlite3.Connection`, run in
the connection's thread in one trip (`Sqlite.grouped`) rather than a trip a statement
through SQLAlchemy: a streamed model turn made eighteen trips, each about 40 µs of the
event loop's CPU and a wake-up of two threads, for statements SQLite runs in a few µs.

The statements are SQLAlchemy's, compiled once for SQLite; errors are raised as SQLAlchemy
raises the driver's (`DBAPIError.instance`), and each statement is told to the engine's
`before_cursor_execute` listeners (tests and benchmarks count them)."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from itertools import accumulate
from typing import Any, TypeVar

import aiosqlite
from sqlalchemy import bindparam, insert, select, update
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.types import now
from runpoint.plugins.sql.appends import Append
from runpoint.plugins.sql.births import TABLES, Births
from runpoint.plugins.sql.compiled import Compiled
from runpoint.plugins.sql.database import Save
from runpoint.plugins.sql.schema import (
    checkpoints,
    messages,
    metadata,
    run_events,
    runs,
    sessions,
    tool_calls,
)

_DIALECT = sqlite.dialect()


def _sql(statement: Any) -> str:
    return Compiled.of(statement, _DIALECT).sql


# each statement's positional parameters are in the order of its bindparams
_RUN = _sql(
    update(runs)
    .where(runs.c.run_id == bindparam("run"), runs.c.revision == bindparam("revision"))
    .values(
        revision=bindparam("next"),
        state=bindparam("state"),
        lease_owner=bindparam("owner"),
        lease_expires_at=bindparam("expires"),
        recoveries=bindparam("recoveries"),
    )
    .returning(runs.c.cancel_requested, runs.c.status)
)
_STATUS = _sql(update(runs).where(runs.c.run_id == bindparam("run")).values(status=bindparam("s")))
_CURSOR = _sql(
    update(sessions)
    .where(sessions.c.session_id == bindparam("session"))
    .values(event_seq=sessions.c.event_seq + bindparam("taken"))
    .returning(sessions.c.event_seq)
)
_MESSAGES = _sql(
    insert(messages).values(
        run_id=bindparam("run"),
        idx=bindparam("idx"),
        role=bindparam("role"),
        data=bindparam("data"),
        event_seq=bindparam("seq"),
        n=bindparam("n"),
    )
)
# the first checkpoint at an index stands, as the first event at a seq
_CHECKPOINT = _sql(
    sqlite.insert(checkpoints)
    .values(
        run_id=bindparam("run"),
        message_index=bindparam("index"),
        data=bindparam("data"),
        event_seq=bindparam("seq"),
    )
    .on_conflict_do_nothing()
)
_INTENTS = _sql(
    insert(tool_calls).values(
        run_id=bindparam("run"), tool_call_id=bindparam("call"), started_at=bindparam("at")
    )
)
_EVENTS = _sql(
    sqlite.insert(run_events)
    .values(run_id=bindparam("run"), seq=bindparam("seq"), data=bindparam("data"))
    .on_conflict_do_nothing()
)
_REVISION = _sql(select(runs.c.revision).where(runs.c.run_id == bindparam("run")))

T = TypeVar("T")


class Statements:
    """Statements on a connection, in its thread, told to the listeners of `told`'s
    engine as SQLAlchemy tells them (with no cursor or context of its own)."""

    def __init__(self, conn: sqlite3.Connection, told: Connection) -> None:
        self.conn = conn
        self._told = told
        self._listeners = told.dispatch.before_cursor_execute

    def one(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        """The statement's first row (None if it has none)."""
        if self._listeners:
            self._listeners(self._told, None, sql, parameters, None, False)
        try:
            return self.conn.execute(sql, parameters).fetchone()
        except sqlite3.Error as error:
            raise _wrapped(sql, parameters, error) from error

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if self._listeners:
            self._listeners(self._told, None, sql, rows, None, True)
        try:
            self.conn.executemany(sql, rows)
        except sqlite3.Error as error:
            raise _wrapped(sql, rows, error) from error


async def in_thread(
    conn: AsyncConnection, driver: aiosqlite.Connection, fn: Callable[[Statements], T]
) -> T:
    """`fn` on `conn` (whose aiosqlite connection is `driver`) in the connection's thread,
    in one trip (aiosqlite's own way to run a call there: each of its methods is one)."""
    told = conn.sync_connection
    assert told is not None  # a connection in use
    call = lambda: fn(Statements(driver._conn, told))  # noqa: E731
    return await driver._execute(call)  # type: ignore[no-any-return, no-untyped-call]


async def driver_of(conn: AsyncConnection) -> aiosqlite.Connection:
    """The aiosqlite connection under SQLAlchemy's."""
    driver = (await conn.get_raw_connection()).driver_connection
    assert isinstance(driver, aiosqlite.Connection)
    return driver


def _wrapped(sql: str, parameters: Any, error: sqlite3.Error) -> BaseException:
    return DBAPIError.instance(sql, parameters, error, sqlite3.Error, dialect=_DIALECT)


def save(written: Save) -> Callable[[Statements], bool | None]:
    """`written` (see `Database.write_save`): the run's `cancel_requested`, or None."""
    run = written.run
    rows, mark, intents, events = (
        written.messages,
        written.checkpoint,
        written.intents,
        written.events,
    )

    def body(s: Statements) -> bool | None:
        found = s.one(
            _RUN,
            (
                run.revision + 1,
                written.state,
                run.lease_owner,
                run.lease_expires_at,
                run.recoveries,
                run.run_id,
                run.revision,
            ),
        )
        if found is None:
            return None
        cancel_requested, status = found
        # apart, and only if it changed (a few times a run): SQLite rewrites the index
        # entries of every column an UPDATE sets, whether its value changes or not
        if status != run.status.value:
            s.one(_STATUS, (run.status.value, run.run_id))
        # the run's row is written under BEGIN IMMEDIATE: the session's may come second;
        # each message takes a place (a row its first's)
        held = sum(n for *_, n in rows)
        (cursor,) = s.one(_CURSOR, (held + 1, run.session_id))
        if rows:
            places = accumulate((n for *_, n in rows), initial=cursor - held)
            s.many(
                _MESSAGES,
                # one place more than rows: the boundary's
                [
                    (run.run_id, i, r, d, at, n)
                    for (i, r, d, n), at in zip(rows, places, strict=False)
                ],
            )
        if mark is not None:
            s.one(_CHECKPOINT, (run.run_id, mark[0], mark[1], cursor))
        if intents:
            started = now()
            s.many(_INTENTS, [(run.run_id, i, started) for i in intents])
        insert_events(s, run.run_id, events)
        return bool(cancel_requested)

    return body


def append(appends: Sequence[Append]) -> Callable[[Statements], list[bool]]:
    """Each append's events, if its run's revision is still the one it has: whether it was."""

    def body(s: Statements) -> list[bool]:
        written = []
        for run, events in appends:
            found = s.one(_REVISION, (run.run_id,))
            written.append(found is not None and found[0] == run.revision)
            if written[-1]:
                insert_events(s, run.run_id, events)
        return written

    return body


def births(born: Births) -> Callable[[Statements], None]:
    """New sessions, their runs and the runs' input (`Database.insert_births`)."""

    def body(s: Statements) -> None:
        for table, rows in zip(TABLES, born, strict=True):
            if rows:
                insert_ = _insert(table.name, tuple(rows[0]))
                s.many(insert_.sql, [insert_.parameters(row) for row in rows])

    return body


@functools.lru_cache(maxsize=16)
def _insert(table: str, columns: tuple[str, ...]) -> Compiled:
    """The INSERT of rows giving `columns` of `table` (a birth's rows give the same)."""
    statement = insert(metadata.tables[table]).values({c: bindparam(c) for c in columns})
    return Compiled.of(statement, _DIALECT)


def insert_events(s: Statements, run_id: str, events: Sequence[tuple[int, bytes]]) -> None:
    if events:
        s.many(_EVENTS, [(run_id, seq, data) for seq, data in events])
