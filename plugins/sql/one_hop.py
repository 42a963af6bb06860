"""SQLite statements in one trip to the thread that owns their connection, not three or four.

aiosqlite keeps each SQLite connection in a thread of its own, and SQLAlchemy's adapter
makes every statement separate trips to it: a cursor, the execute, the fetch of its rows
and the cursor's close. A trip is a queue put, a wake-up of that thread and one of the
event loop when it is done: about 40 µs of CPU and, on a busy machine, longer waiting for
both threads to be scheduled, where SQLite runs the statement in a few µs. A model turn
made about 30 such trips. This cursor does the four in one trip and keeps what the
statement left (its rows, description, row count and last row id); the statements, their
errors and transactions are SQLAlchemy's and aiosqlite's as before.
"""

from __future__ import annotations

import collections
import sqlite3
from typing import Any

import aiosqlite
from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.util import EMPTY_DICT

Outcome = tuple[Any, list[Any], int, int | None]  # description, rows, rowcount, lastrowid


def _run(conn: sqlite3.Connection, many: bool, operation: str, parameters: Any) -> Outcome:
    """The statement, in the connection's thread."""
    cursor = conn.cursor()
    try:
        if many:
            cursor.executemany(operation, parameters)
        elif parameters is None:
            cursor.execute(operation)
        else:
            cursor.execute(operation, parameters)
        description = cursor.description
        rows = cursor.fetchall() if description else []
        return description, rows, cursor.rowcount, cursor.lastrowid
    finally:
        cursor.close()


class OneHopCursor(AsyncAdapt_aiosqlite_cursor):
    __slots__ = ("_description", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: AsyncAdapt_aiosqlite_connection) -> None:
        # no cursor of aiosqlite's (making one is a trip): each statement makes its own
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._cursor = None  # type: ignore[assignment]
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: int | None = None

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> int:
        return self._lastrowid  # type: ignore[return-value]

    @property
    def arraysize(self) -> int:
        return 1

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        pass  # the rows are fetched whole

    async def _async_soft_close(self) -> None:
        pass  # nothing is open between statements

    async def _execute_async(self, operation: Any, parameters: Any) -> None:
        await self._one_trip(False, operation, parameters)

    async def _executemany_async(self, operation: Any, seq_of_parameters: Any) -> None:
        await self._one_trip(True, operation, seq_of_parameters)

    async def _one_trip(self, many: bool, operation: Any, parameters: Any) -> None:
        connection: aiosqlite.Connection = self._connection  # type: ignore[assignment]
        async with self._adapt_connection._execute_mutex:
            # aiosqlite's own way to run a call in the connection's thread (its methods
            # are each one such call)
            outcome: Outcome = await connection._execute(  # type: ignore[no-untyped-call]
                _run, connection._conn, many, operation, parameters
            )
        self._description, rows, self._rowcount, self._lastrowid = outcome
        self._rows = collections.deque(rows)


class OneHopConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()
    _cursor_cls = OneHopCursor  # type: ignore[assignment]

    def rollback(self) -> None:
        # A connection goes back to the pool with a rollback: a trip to its thread, which
        # sqlite3 then skips when SQLite has no transaction open, as after nearly every
        # write (a group commits in its own trip) and read. Skipped here, without the trip:
        # no statement of this connection is under way when SQLAlchemy ends with it (one
        # interrupted by a cancel makes SQLAlchemy discard the connection).
        connection: aiosqlite.Connection = self._connection  # type: ignore[assignment]
        if connection._connection is not None and not connection.in_transaction:
            return
        super().rollback()


class OneHopDbapi(AsyncAdapt_aiosqlite_dbapi):
    """aiosqlite as SQLAlchemy's dialect sees it (`create_engine(module=...)`), with
    `OneHopCursor` for its statements (server-side cursors stay SQLAlchemy's)."""

    def __init__(self) -> None:
        super().__init__(aiosqlite, sqlite3)

    def connect(self, *arg: Any, **kw: Any) -> OneHopConnection:
        adapted = super().connect(*arg, **kw)
        return OneHopConnection(self, adapted._connection)
