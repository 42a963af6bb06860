"""Approvals: inserted once, settled once, from 'pending' (see runpoint.seams.approvals)."""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy import delete, exists, func, or_, select, update

from runpoint.core.types import Approval, ApprovalQuery, ApprovalStatus, RunStatus
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.documents import document
from runpoint.plugins.sql.schema import approvals, runs

_decode = msgspec.json.Decoder(Approval).decode
_c = approvals.c
_newer = approvals.alias("newer")
_STALE = (
    select(_c.data)
    .select_from(approvals.outerjoin(runs, runs.c.run_id == _c.run_id))
    .where(
        _c.status == "pending",
        or_(
            runs.c.run_id.is_(None),
            runs.c.status != RunStatus.PAUSED.value,
            runs.c.hidden,
            exists().where(_newer.c.run_id == _c.run_id, _newer.c.created_at > _c.created_at),
        ),
    )
    .order_by(_c.created_at)
)


class SqlApprovals:
    db: Database

    async def add_approval(self, approval: Approval) -> bool:
        async with self.db.write() as conn:
            added = await conn.execute(
                self.db.insert_new(approvals).values(
                    id=approval.id,
                    run_id=approval.run_id,
                    session_id=approval.session_id,
                    agent_id=approval.agent_id,
                    team_id=approval.team_id,
                    user_id=approval.user_id,
                    status=approval.status,
                    pause_type=approval.pause_type,
                    created_at=approval.created_at,
                    expires_at=approval.expires_at,
                    data=document(approval),
                )
            )
            return bool(added.rowcount)

    async def get_approval(self, approval_id: str) -> Approval | None:
        found = await self.db.read(select(_c.data).where(_c.id == approval_id))
        return _decode(found[0][0]) if found else None

    async def list_approvals(
        self, query: ApprovalQuery, *, limit: int, offset: int
    ) -> tuple[list[Approval], int]:
        wanted = [
            getattr(_c, name) == value
            for name, value in msgspec.structs.asdict(query).items()
            if value is not None
        ]
        total = await self.db.read(select(func.count()).select_from(approvals).where(*wanted))
        if not limit:
            return [], int(total[0][0])
        page = (
            select(_c.data)
            .where(*wanted)
            .order_by(_c.created_at.desc(), _c.id)
            .limit(limit)
            .offset(offset)
        )
        return [_decode(row[0]) for row in await self.db.read(page)], int(total[0][0])

    async def settle_approval(
        self,
        approval_id: str,
        status: ApprovalStatus,
        resolved_by: str | None,
        resolution_data: dict[str, Any] | None,
    ) -> Approval | None:
        pending = (_c.id == approval_id) & (_c.status == "pending")
        async with self.db.write() as conn:
            data = await conn.scalar(self.db.locking(select(_c.data).where(pending)))
            if data is None:
                return None
            approval = _decode(data)
            approval.settle(status, resolved_by, resolution_data)
            settled = await conn.execute(
                update(approvals).where(pending).values(status=status, data=document(approval))
            )
            return approval if settled.rowcount else None

    async def delete_approval(self, approval_id: str) -> bool:
        async with self.db.write() as conn:
            deleted = await conn.execute(delete(approvals).where(_c.id == approval_id))
            return bool(deleted.rowcount)

    async def due_approvals(self, before: float, limit: int) -> list[Approval]:
        due = (
            select(_c.data)
            .where(_c.status == "pending", _c.expires_at < before)
            .order_by(_c.expires_at)
            .limit(limit)
        )
        return [_decode(row[0]) for row in await self.db.read(due)]

    async def stale_approvals(self, limit: int) -> list[Approval]:
        return [_decode(row[0]) for row in await self.db.read(_STALE.limit(limit))]
