"""Approvals: inserted once, settled once, from 'pending' (see runpoint.seams.approvals)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import msgspec
from sqlalchemy import delete, exists, func, or_, select, update

from runpoint.core.sealing import Codec, readable
from runpoint.core.types import Approval, ApprovalQuery, ApprovalStatus, RunStatus
from runpoint.plugins.sql import team_keys
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.documents import document
from runpoint.plugins.sql.schema import approvals, runs

_decode = msgspec.json.Decoder(Approval).decode
_c = approvals.c
_ROWS = (_c.id, _c.data)  # the key each document is sealed under, and the document
_DOCUMENTS = select(*_ROWS)
_newer = approvals.alias("newer")
_STALE = (
    select(*_ROWS)
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
        await team_keys.hold(self.db, approval.team_id)
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
                    data=_sealed(self.db.codec, approval),
                )
            )
            return bool(added.rowcount)

    async def get_approval(self, approval_id: str) -> Approval | None:
        found = await self.db.read(select(*_ROWS).where(_c.id == approval_id))
        return _opened(self.db.codec, found[0]) if found else None

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
            select(*_ROWS)
            .where(*wanted)
            .order_by(_c.created_at.desc(), _c.id)
            .limit(limit)
            .offset(offset)
        )
        rows = await self.db.read(page)
        return [_opened(self.db.codec, row) for row in rows], int(total[0][0])

    async def settle_approval(
        self,
        approval_id: str,
        status: ApprovalStatus,
        resolved_by: str | None,
        resolution_data: dict[str, Any] | None,
    ) -> Approval | None:
        pending = (_c.id == approval_id) & (_c.status == "pending")
        async with self.db.write() as conn:
            found = (await conn.execute(self.db.locking(select(*_ROWS).where(pending)))).all()
            if not found:
                return None
            await team_keys.load_of(self.db, found, _DOCUMENTS)  # read by `conn`, not `db.read`
            approval = _opened(self.db.codec, found[0])
            await team_keys.hold(self.db, approval.team_id)
            approval.settle(status, resolved_by, resolution_data)
            settled = await conn.execute(
                update(approvals)
                .where(pending)
                .values(status=status, data=_sealed(self.db.codec, approval))
            )
            return approval if settled.rowcount else None

    async def delete_approval(self, approval_id: str) -> bool:
        async with self.db.write() as conn:
            deleted = await conn.execute(delete(approvals).where(_c.id == approval_id))
            return bool(deleted.rowcount)

    async def due_approvals(self, before: float, limit: int) -> list[Approval]:
        due = (
            select(*_ROWS)
            .where(_c.status == "pending", _c.expires_at < before)
            .order_by(_c.expires_at)
            .limit(limit)
        )
        return readable(await self.db.read(due), partial(_opened, self.db.codec))

    async def stale_approvals(self, limit: int) -> list[Approval]:
        rows = await self.db.read(_STALE.limit(limit))
        return readable(rows, partial(_opened, self.db.codec))


# module functions, not methods: SqlStorage mixes every Sql* class into one namespace
def _sealed(codec: Codec, approval: Approval) -> bytes:
    return codec.seal(
        document(approval), approvals.name, "data", approval.id, team=approval.team_id
    )


def _opened(codec: Codec, row: Sequence[Any]) -> Approval:
    id_, data = row
    return _decode(codec.open(data, approvals.name, "data", id_))
