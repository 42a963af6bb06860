"""`Storage` in this process's memory (``--db memory:``): the reference backend, for tests
and demos. It forgets everything when the process ends, and two processes (or two
`MemoryStorage` objects) never share it. It has no run queue: a process executes the runs
it accepts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from runpoint import hookimpl
from runpoint.plugins.memory.events import MemoryEvents
from runpoint.plugins.memory.keys import MemoryKeys
from runpoint.plugins.memory.runs import MemoryRuns
from runpoint.plugins.memory.sessions import MemorySessions
from runpoint.plugins.memory.transcripts import MemoryTranscripts
from runpoint.seams.storage import Resealed, StorageFactory

if TYPE_CHECKING:
    from runpoint.core.keyring import Keyring

__all__ = ["MemoryStorage"]


class MemoryStorage(MemorySessions, MemoryRuns, MemoryTranscripts, MemoryEvents, MemoryKeys):
    """Every role of `Storage` over one set of tables (see `tables`)."""

    def encrypt_with(self, keyring: Keyring) -> None:
        """Nothing of it outlives the process: nothing is at rest, nothing to seal."""

    @property
    def refused(self) -> int:
        return 0

    async def reseal(self, *, encrypt: bool, check: bool, batch: int) -> Resealed:
        return Resealed(0, [])


@hookimpl
def runpoint_storage_backends() -> Mapping[str, StorageFactory]:
    return {"memory": MemoryStorage}
