"""The storage seam's jobs role: runs seen as the work a server does (AgentOS's job queue),
by status, across a team's sessions."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from runpoint.core.types import Run, RunStatus


class JobStore(Protocol):
    async def runs_by_status(
        self, team_id: str, statuses: Collection[RunStatus], *, limit: int, offset: int
    ) -> tuple[list[Run], int]:
        """A page of the team's runs in `statuses` (rolled back ones too), the newest
        made first, and how many there are in all."""

    async def count_runs_by_status(self, team_id: str) -> dict[RunStatus, int]:
        """How many runs of the team are in each status (those with none absent)."""
