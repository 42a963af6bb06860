"""Which database failures are the database's state, not the statement's: a server that
cannot be reached or cut the connection (down, restarting, a network fault), a pool with
no connection to give in time, a disk with no room for a write. Each is raised as the
driver raised it (through SQLAlchemy, or from asyncpg directly: reads, the run queue);
`outage` reads the chain of causes, so one test serves every path."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from runpoint.core.errors import StorageFull, Unavailable

# PostgreSQL's SQLSTATEs: class 08, a connection's failure; 57P01-03, the server shutting
# down, crashed or starting up; 53300, no connection slot; 53100, its disk full
_GONE_STATES = ("08", "57P01", "57P02", "57P03", "53300")
_FULL_STATE = "53100"
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)

# seconds a PostgreSQL statement may take before asyncpg cancels it and its request is
# answered 503: a server that accepts connections but stalls (a network that stops
# forwarding, a lock another session holds) does not hold a request, a probe or a run's
# write for ever. Every statement is short (a run's rows by key, a batch of a sweep).
STATEMENT_TIMEOUT = 10.0


def statement_timeout(url: URL) -> tuple[URL, float]:
    """The URL's `command_timeout` (asyncpg's name; seconds), else STATEMENT_TIMEOUT, and
    the URL without it (asyncpg would send it to the server as a setting)."""
    given = url.query.get("command_timeout")
    seconds = float(given if isinstance(given, str) else STATEMENT_TIMEOUT)
    return url.difference_update_query(["command_timeout"]), seconds


def outage(exc: BaseException) -> Unavailable | None:
    """What a failure means to a client if the database, not the request, is at fault:
    StorageFull or Unavailable (saying which), else None."""
    for cause in _causes(exc):
        if isinstance(cause, Unavailable):
            return cause
        state = getattr(cause, "sqlstate", None)
        if state == _FULL_STATE or _sqlite_full(cause) or _errno(cause) in _FULL_ERRNOS:
            return StorageFull(f"the database's storage is full: {_said(cause)}")
        gone = isinstance(cause, (OSError, TimeoutError, PoolTimeout)) or (
            isinstance(state, str) and state.startswith(_GONE_STATES)
        )
        if gone or _disconnected(cause):
            return Unavailable(f"the database cannot be reached: {_said(cause)}")
    return None


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        orig = getattr(exc, "orig", None)
        exc = orig if isinstance(orig, BaseException) else (exc.__cause__ or exc.__context__)  # type: ignore[assignment]


def _disconnected(exc: BaseException) -> bool:
    """A connection SQLAlchemy found closed, or asyncpg's word for one it had lost."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    name = type(exc).__name__
    return name in ("ConnectionDoesNotExistError", "ConnectionFailureError") or (
        name == "InterfaceError" and "connection" in str(exc) and "closed" in str(exc)
    )


def _sqlite_full(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.Error) and code is not None and code & 0xFF == sqlite3.SQLITE_FULL
    )


def _errno(exc: BaseException) -> int | None:
    return exc.errno if isinstance(exc, OSError) else None


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
