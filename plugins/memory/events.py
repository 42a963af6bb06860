"""Each run's event log."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from runpoint.core.types import Run, RunEvent
from runpoint.plugins.memory.tables import Tables


class MemoryEvents(Tables):
    async def append_events(self, run: Run, events: Sequence[RunEvent]) -> bool:
        stored = self._runs.get(run.run_id)
        if stored is None or stored.revision != run.revision:
            return False
        self._append_events(run, events)
        return True

    async def read_events(self, run: Run, after: int, limit: int) -> list[RunEvent]:
        log = self._events.get(run.run_id, [])
        start = bisect.bisect_right(log, after, key=lambda e: e.seq)
        return [
            self._open(RunEvent, e.data, "run_events", "data", run.run_id, e.seq)
            for e in log[start : start + limit]
        ]

    async def last_event_seq(self, run_id: str) -> int:
        log = self._events.get(run_id)
        return log[-1].seq if log else 0
