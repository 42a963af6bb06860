"""`Storage` in this process's memory (``--db memory:``): the reference backend, for tests
and demos. It forgets everything when the process ends, and two processes (or two
`MemoryStorage` objects) never share it. It has no run queue: a process executes the runs
it accepts."""

from __future__ import annotations

from collections.abc import Mapping

from runpoint import hookimpl
from runpoint.plugins.memory.approvals import MemoryApprovals
from runpoint.plugins.memory.encryption import MemoryEncryption
from runpoint.plugins.memory.events import MemoryEvents
from runpoint.plugins.memory.jobs import MemoryJobs
from runpoint.plugins.memory.keys import MemoryKeys
from runpoint.plugins.memory.runs import MemoryRuns
from runpoint.plugins.memory.schedules import MemorySchedules
from runpoint.plugins.memory.sessions import MemorySessions
from runpoint.plugins.memory.transcripts import MemoryTranscripts
from runpoint.seams.storage import StorageFactory

__all__ = ["MemoryStorage"]


class MemoryStorage(
    MemorySessions,
    MemoryRuns,
    MemoryTranscripts,
    MemoryEvents,
    MemoryKeys,
    MemoryApprovals,
    MemoryJobs,
    MemorySchedules,
    MemoryEncryption,
):
    """Every role of `Storage` over one set of tables (see `tables`)."""


@hookimpl
def runpoint_storage_backends() -> Mapping[str, StorageFactory]:
    return {"memory": MemoryStorage}
