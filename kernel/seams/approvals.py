"""The storage seam's approvals role: the inbox of calls waiting for a person (see
`runpoint.core.approval`). An approval is inserted once, then changes only from
"pending" to how it was settled, once: the first settle wins. Removing a run (a session
deleted, a retention sweep) removes its approvals with it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from runpoint.core.types import Approval, ApprovalQuery, ApprovalStatus


class ApprovalStore(Protocol):
    async def add_approval(self, approval: Approval) -> bool:
        """Insert `approval` unless one of its id exists (then nothing: False)."""

    async def get_approval(self, approval_id: str) -> Approval | None: ...

    async def list_approvals(
        self, query: ApprovalQuery, *, limit: int, offset: int
    ) -> tuple[list[Approval], int]:
        """A page of the approvals `query` names, newest (`created_at`) first, ties by id,
        and how many it names in all (`limit` 0: only the count)."""

    async def settle_approval(
        self,
        approval_id: str,
        status: ApprovalStatus,
        resolved_by: str | None,
        resolution_data: dict[str, Any] | None,
    ) -> Approval | None:
        """Settle a pending approval, atomically (see `Approval.settle`); None (nothing
        written) if it is unknown or not pending any more."""

    async def delete_approval(self, approval_id: str) -> bool:
        """Delete it; False if unknown."""

    async def due_approvals(self, before: float, limit: int) -> Sequence[Approval]:
        """Pending approvals whose `expires_at` is before `before`, earliest first."""

    async def stale_approvals(self, limit: int) -> Sequence[Approval]:
        """Pending approvals whose run left their pause: it is not PAUSED, is hidden (rolled
        back) or gone, or paused again since (a newer approval of it); oldest first."""
