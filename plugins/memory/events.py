"""Each run's event log."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from runpoint.core.types import Run, RunEvent
from runpoint.plugins.memory.tables import Tables, copy


class MemoryEvents(Tables):
    async def append_events(self, run: Run, events: Sequence[RunEvent]) -> bool:
        stored = self._runs.get(run.run_id)
        if stored is None or stored.revision != run.revision:
            return False
        self._append_events(run.run_id, events)
        return True

    async def read_events(self, run: Run, after: int, limit: int) -> list[RunEvent]:
        log = self._events.get(run.run_id, [])
        start = bisect.bisect_right(log, after, key=lambda e: e.seq)
        return [copy(e) for e in log[start : start + limit]]

    async def last_event_seq(self, run_id: str) -> int:
        log = self._events.get(run_id)
        return log[-1].seq if log else 0
