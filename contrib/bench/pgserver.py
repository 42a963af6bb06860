"""What a PostgreSQL server on this machine spends, read from outside it: its processes'
CPU seconds and bytes written to disk (from /proc), how far its write-ahead log moved, and
what its busy backends are doing (sampled).

The postmaster's /proc figures include those of its children that have exited (reaped),
so a backend that served a connection and quit still counts."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections import Counter
from collections.abc import Iterator
from typing import NamedTuple

import asyncpg
from sqlalchemy.engine import make_url


def _dsn(database: str) -> str:
    """A SQLAlchemy URL as asyncpg takes it."""
    return make_url(database).set(drivername="postgresql").render_as_string(False)


async def postmaster_pid(database: str) -> int:
    connection = await asyncpg.connect(_dsn(database))
    try:  # the parent of this connection's backend, while it lives
        return int(_stat(await connection.fetchval("SELECT pg_backend_pid()"))[1])
    finally:
        await connection.close()


async def wal_position(database: str) -> int:
    """The server's current WAL position, in bytes: the difference of two is the WAL
    written between them (by every database of the server)."""
    connection = await asyncpg.connect(_dsn(database))
    try:
        return int(await connection.fetchval("SELECT pg_current_wal_lsn() - '0/0'"))
    finally:
        await connection.close()


async def checkpoint(database: str) -> None:
    """Write every dirty page out now (the data files' share of what was written)."""
    connection = await asyncpg.connect(_dsn(database))
    try:
        await connection.execute("CHECKPOINT")
    finally:
        await connection.close()


# What the server executed, by statement, from pg_stat_statements (which a server loads at
# its start: see STATEMENT_SETTINGS): times it ran, was planned, and the WAL it wrote
STATEMENT_SETTINGS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track_planning": "on",
}
_EXECUTED = """
SELECT query, calls, plans, wal_bytes FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND query NOT LIKE '%pg_stat_%'
"""


class Executed(NamedTuple):
    query: str
    calls: int
    plans: int
    wal_bytes: int


async def executed(database: str, *, reset: bool = False) -> list[Executed]:
    """Each statement the server has executed since the last `reset` (which starts counting
    anew), on a server that loaded pg_stat_statements."""
    connection = await asyncpg.connect(_dsn(database))
    try:
        await connection.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        if reset:
            await connection.execute("SELECT pg_stat_statements_reset()")
            return []
        rows = await connection.fetch(_EXECUTED)
        return [Executed(r["query"], r["calls"], r["plans"], int(r["wal_bytes"])) for r in rows]
    finally:
        await connection.close()


# What PostgreSQL's backends are doing while they hold a statement or a transaction,
# sampled: if the database serialised the runs, they would be waiting on locks.
_BUSY_BACKENDS = """
SELECT wait_event_type, wait_event FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend'
  AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')
"""


async def doing(database: str, stop: threading.Event) -> tuple[Counter[str], float]:
    """Samples of what busy backends do, every 20 ms until `stop`, and the CPU seconds
    the sampling cost PostgreSQL (left out of the runs' share)."""
    connection = await asyncpg.connect(_dsn(database))
    own = await connection.fetchval("SELECT pg_backend_pid()")
    states: Counter[str] = Counter()
    try:
        while not stop.is_set():
            for row in await connection.fetch(_BUSY_BACKENDS):
                states[_state(row["wait_event_type"], row["wait_event"])] += 1
            await asyncio.sleep(0.02)
        cpu = backend_cpu_seconds(own)
    finally:
        await connection.close()
    return states, cpu


def _state(wait_type: str | None, wait_event: str | None) -> str:
    if wait_type is None:
        return "executing"
    if wait_event == "ClientRead":
        return "waiting for runpoint (mid-transaction)"
    if wait_type == "Lock":
        return "waiting for a lock on a row or table"
    if wait_event is not None and wait_event.startswith("WAL"):
        return "committing (writing and flushing the WAL)"
    return f"other: {wait_type} {wait_event}"


def cpu_seconds(postmaster: int) -> float:
    """CPU seconds of the server: the postmaster, its reaped children and its live ones."""
    ticks = sum(int(f) for f in _stat(postmaster)[11:15])
    ticks += sum(int(stat[11]) + int(stat[12]) for _, stat in _children(postmaster))
    return ticks / os.sysconf("SC_CLK_TCK")


def backend_cpu_seconds(pid: int) -> float:
    """CPU seconds of one live backend."""
    return sum(int(f) for f in _stat(pid)[11:13]) / os.sysconf("SC_CLK_TCK")


def write_bytes(postmaster: int) -> int | None:
    """Bytes the server's processes had the OS write to disk (WAL, data files), reaped
    children included; None where /proc does not show another user's I/O (not root)."""
    try:
        return _written(postmaster) + sum(_written(pid) for pid, _ in _children(postmaster))
    except PermissionError:
        return None


def _children(parent: int) -> Iterator[tuple[int, list[str]]]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                stat = _stat(int(entry))
                if int(stat[1]) == parent:
                    yield int(entry), stat


def _written(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/io") as file:
            fields = dict(line.split(": ") for line in file.read().splitlines())
    except (FileNotFoundError, ProcessLookupError):
        return 0  # exited meanwhile: counted in the postmaster's once reaped
    return int(fields["write_bytes"])


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat from the field after the command: [state, ppid, ...]."""
    with open(f"/proc/{pid}/stat") as file:
        return file.read().rsplit(")", 1)[1].split()
