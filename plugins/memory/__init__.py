"""`Storage` in this process's memory (``--db memory:``): the reference backend, for tests
and demos. It forgets everything when the process ends, and two processes (or two
`MemoryStorage` objects) never share it. It has no run queue: a process executes the runs
it accepts."""

from __future__ import annotations

from collections.abc import Mapping

from runpoint import hookimpl
from runpoint.plugins.memory.events import Events
from runpoint.plugins.memory.keys import Keys
from runpoint.plugins.memory.runs import Runs
from runpoint.plugins.memory.sessions import Sessions
from runpoint.plugins.memory.transcripts import Transcripts
from runpoint.storage import StorageFactory

__all__ = ["MemoryStorage"]


class MemoryStorage(Sessions, Runs, Transcripts, Events, Keys):
    """Every role of `Storage` over one set of tables (see `tables`)."""


@hookimpl
def runpoint_storage_backends() -> Mapping[str, StorageFactory]:
    return {"memory": MemoryStorage}
