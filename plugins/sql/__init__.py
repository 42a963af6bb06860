"""SQL storage on SQLAlchemy 2 (async): SQLite (WAL) embedded, PostgreSQL to scale out,
with a run queue (pgqueuer) on PostgreSQL."""

from collections.abc import Mapping

from runpoint import hookimpl
from runpoint.plugins.sql.queue import PgQueue
from runpoint.plugins.sql.store import SqlStorage
from runpoint.runqueue import RunQueueFactory
from runpoint.storage import StorageFactory

__all__ = ["PgQueue", "SqlStorage"]


@hookimpl
def runpoint_storage_backends() -> Mapping[str, StorageFactory]:
    return {"sqlite": SqlStorage, "postgresql": SqlStorage}


@hookimpl
def runpoint_run_queues() -> Mapping[str, RunQueueFactory]:
    # SQLite has no queue: a process executes the runs it accepts
    return {"postgresql": PgQueue}
