"""SQL storage on SQLAlchemy 2 (async): SQLite (WAL) embedded, PostgreSQL to scale out."""

from collections.abc import Mapping

from runpoint import hookimpl
from runpoint.plugins.sql.store import SqlStorage
from runpoint.storage import StorageFactory

__all__ = ["SqlStorage"]


@hookimpl
def runpoint_storage_backends() -> Mapping[str, StorageFactory]:
    return {"sqlite": SqlStorage, "postgresql": SqlStorage}
