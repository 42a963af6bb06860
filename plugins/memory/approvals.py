"""Approvals: inserted once, settled once (see runpoint.seams.approvals)."""

from __future__ import annotations

from typing import Any

import msgspec

from runpoint.core.types import Approval, ApprovalQuery, ApprovalStatus, RunStatus
from runpoint.plugins.memory.tables import Tables, copy


class MemoryApprovals(Tables):
    async def add_approval(self, approval: Approval) -> bool:
        if approval.id in self._approvals:
            return False
        self._approvals[approval.id] = copy(approval)
        return True

    async def get_approval(self, approval_id: str) -> Approval | None:
        found = self._approvals.get(approval_id)
        return None if found is None else copy(found)

    async def list_approvals(
        self, query: ApprovalQuery, *, limit: int, offset: int
    ) -> tuple[list[Approval], int]:
        wanted = {k: v for k, v in msgspec.structs.asdict(query).items() if v is not None}
        found = [
            a
            for a in self._approvals.values()
            if all(getattr(a, k) == v for k, v in wanted.items())
        ]
        found.sort(key=lambda a: (-a.created_at, a.id))
        return [copy(a) for a in found[offset : offset + limit]], len(found)

    async def settle_approval(
        self,
        approval_id: str,
        status: ApprovalStatus,
        resolved_by: str | None,
        resolution_data: dict[str, Any] | None,
    ) -> Approval | None:
        found = self._approvals.get(approval_id)
        if found is None or found.status != "pending":
            return None
        found.settle(status, resolved_by, resolution_data)
        self._approvals[approval_id] = found
        return found

    async def delete_approval(self, approval_id: str) -> bool:
        return self._approvals.pop(approval_id, None) is not None

    async def due_approvals(self, before: float, limit: int) -> list[Approval]:
        due = [
            a
            for a in self._approvals.values()
            if a.status == "pending" and a.expires_at is not None and a.expires_at < before
        ]
        due.sort(key=lambda a: a.expires_at or 0.0)
        return [copy(a) for a in due[:limit]]

    async def stale_approvals(self, limit: int) -> list[Approval]:
        newest: dict[str, float] = {}
        for a in self._approvals.values():
            newest[a.run_id] = max(newest.get(a.run_id, a.created_at), a.created_at)

        def left(a: Approval) -> bool:
            run = self._runs.get(a.run_id)
            paused = run is not None and run.status == RunStatus.PAUSED and not run.hidden
            return not paused or a.created_at < newest[a.run_id]

        stale = [a for a in self._approvals.values() if a.status == "pending" and left(a)]
        stale.sort(key=lambda a: a.created_at)
        return [copy(a) for a in stale[:limit]]
