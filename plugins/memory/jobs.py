"""Runs by status, across a team's sessions (see runpoint.seams.jobs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

from runpoint.core.types import Run, RunStatus
from runpoint.plugins.memory.tables import Tables, copy


class MemoryJobs(Tables):
    async def runs_by_status(
        self, team_id: str, statuses: Collection[RunStatus], *, limit: int, offset: int
    ) -> tuple[list[Run], int]:
        found = [r for r in self._runs.values() if r.team_id == team_id and r.status in statuses]
        found.sort(key=lambda r: -self._run_seqs[r.run_id])
        return [copy(r) for r in found[offset : offset + limit]], len(found)

    async def count_runs_by_status(self, team_id: str) -> dict[RunStatus, int]:
        return dict(Counter(r.status for r in self._runs.values() if r.team_id == team_id))
