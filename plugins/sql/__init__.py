"""SQL storage on SQLAlchemy 2 (async): SQLite (WAL) embedded, PostgreSQL to scale out,
with a run queue (pgqueuer) on PostgreSQL.

Each is imported when a database URL names it, not when the plugin loads: a command on
SQLite never imports SQLAlchemy's PostgreSQL side, asyncpg or pgqueuer (which need the
`postgres` extra), and one on `memory:` no SQLAlchemy at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from runpoint import hookimpl
from runpoint.core.errors import needs_extra
from runpoint.seams.runqueue import RunQueueFactory
from runpoint.seams.storage import StorageFactory

if TYPE_CHECKING:
    from runpoint.seams.runqueue import RunQueue
    from runpoint.seams.storage import Storage


def sql_storage(url: str) -> Storage:
    from runpoint.plugins.sql.store import SqlStorage

    return SqlStorage(url)


def pg_queue(url: str) -> RunQueue:
    with needs_extra("postgres", "the run queue on PostgreSQL", "pgqueuer", "asyncpg"):
        from runpoint.plugins.sql.queue import PgQueue

    return PgQueue(url)


@hookimpl
def runpoint_storage_backends() -> Mapping[str, StorageFactory]:
    return {"sqlite": sql_storage, "postgresql": sql_storage}


@hookimpl
def runpoint_run_queues() -> Mapping[str, RunQueueFactory]:
    # SQLite has no queue: a process executes the runs it accepts
    return {"postgresql": pg_queue}
