"""Session checkpoints: captures of whole sessions, PENDING under a lease until they end."""

from __future__ import annotations

import msgspec
from sqlalchemy import bindparam, delete, insert, select, update

from runpoint.core import transcript
from runpoint.core.types import SessionCapture, SessionCheckpoint, SessionCheckpointStatus
from runpoint.plugins.sql import team_keys
from runpoint.plugins.sql.births import reads_of
from runpoint.plugins.sql.database import NO_END, Database
from runpoint.plugins.sql.documents import document
from runpoint.plugins.sql.erase import erase
from runpoint.plugins.sql.schema import run_reads, session_checkpoints

_decode_checkpoint = msgspec.json.Decoder(SessionCheckpoint).decode
_decode_capture = msgspec.json.Decoder(SessionCapture).decode
_c = session_checkpoints.c
_GET = select(_c.data).where(_c.checkpoint_id == bindparam("id"))
_CAPTURE = select(_c.capture).where(_c.checkpoint_id == bindparam("id"))
_PAGE = (
    select(_c.seq, _c.data)
    .where(_c.session_id == bindparam("id"), _c.seq < bindparam("before"))
    .order_by(_c.seq.desc())
    .limit(bindparam("limit"))
)


class SqlSessionCheckpoints:
    db: Database

    async def add_session_checkpoint(self, checkpoint: SessionCheckpoint) -> None:
        async with self.db.write() as conn:
            await conn.execute(
                insert(session_checkpoints).values(
                    checkpoint_id=checkpoint.checkpoint_id,
                    session_id=checkpoint.session_id,
                    data=document(checkpoint),
                )
            )

    async def update_session_checkpoint(
        self, checkpoint: SessionCheckpoint, capture: bytes | None, owner: str | None
    ) -> bool:
        row = _c.checkpoint_id == checkpoint.checkpoint_id
        session_id = checkpoint.session_id
        team = await team_keys.hold_for(self.db, team_keys.OF_SESSION, session_id)
        async with self.db.write() as conn:
            data = await conn.scalar(self.db.locking(select(_c.data).where(row)))
            stored = None if data is None else _decode_checkpoint(data)
            if stored is None or stored.status is not SessionCheckpointStatus.PENDING:
                return False
            if stored.lease is not None and not stored.lease.open_to(owner):
                return False
            await conn.execute(
                update(session_checkpoints)
                .where(row)
                .values(
                    data=document(checkpoint),
                    capture=None
                    if capture is None or team is None  # its session went: removed anyway
                    else self.db.codec.seal(
                        capture,
                        session_checkpoints.name,
                        "capture",
                        checkpoint.checkpoint_id,
                        team=team,
                    ),
                )
            )
            if capture is not None:  # what it captured is read while it stands
                segments = transcript.captured(_decode_capture(capture).runs)
                if reads := reads_of([(checkpoint.checkpoint_id, segments)]):
                    await conn.execute(insert(run_reads), reads)
            return True

    async def get_session_checkpoint(self, checkpoint_id: str) -> SessionCheckpoint | None:
        found = await self.db.read(_GET, {"id": checkpoint_id})
        return _decode_checkpoint(found[0][0]) if found else None

    async def session_capture(self, checkpoint_id: str) -> SessionCapture | None:
        found = await self.db.read(_CAPTURE, {"id": checkpoint_id})
        if not found or found[0][0] is None:
            return None
        return _decode_capture(
            self.db.codec.open(found[0][0], session_checkpoints.name, "capture", checkpoint_id)
        )

    async def list_session_checkpoints(
        self, session_id: str, *, limit: int, before: int | None
    ) -> list[tuple[int, SessionCheckpoint]]:
        # a client's token may be any integer: one beyond the column's range means that end
        before = NO_END if before is None else max(0, min(before, NO_END))
        rows = await self.db.read(_PAGE, {"id": session_id, "before": before, "limit": limit})
        return [(seq, _decode_checkpoint(data)) for seq, data in rows]

    async def delete_session_checkpoint(self, checkpoint_id: str) -> None:
        async with self.db.write() as conn:
            await conn.execute(delete(session_checkpoints).where(_c.checkpoint_id == checkpoint_id))
            await erase(conn, self.db.codec, [checkpoint_id], [])
