"""Each run's event log: an event is a row of compact JSON bytes, keyed by (run_id, seq)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from sqlalchemy import bindparam, func, select

from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.schema import run_events
from runpoint.types import Run, RunEvent


class Stored(msgspec.Struct, array_like=True):
    """What a row keeps of an event: the rest is its run's."""

    event: str
    created_at: float
    data: dict[str, Any]


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(Stored).decode
_READ = (
    select(run_events.c.seq, run_events.c.data)
    .where(run_events.c.run_id == bindparam("run"), run_events.c.seq > bindparam("after"))
    .order_by(run_events.c.seq)
    .limit(bindparam("limit"))
)
_LAST = select(func.max(run_events.c.seq)).where(run_events.c.run_id == bindparam("run"))


def event_rows(events: Sequence[RunEvent]) -> list[tuple[int, bytes]]:
    """(seq, document) of each event, as `run_events` keeps it."""
    return [(e.seq, _encode(Stored(e.event, e.created_at, e.data))) for e in events]


class SqlEvents:
    db: Database

    async def append_events(self, run: Run, events: Sequence[RunEvent]) -> bool:
        return await self.db.append_events(run, event_rows(events))

    async def read_events(self, run: Run, after: int, limit: int) -> list[RunEvent]:
        rows = await self.db.read(_READ, {"run": run.run_id, "after": after, "limit": limit})
        ids = run.run_id, run.session_id, run.agent_id
        return [RunEvent(e.event, *ids, e.created_at, e.data, seq) for seq, e in _decoded(rows)]

    async def last_event_seq(self, run_id: str) -> int:
        rows = await self.db.read(_LAST, {"run": run_id})
        return int(rows[0][0] or 0)


def _decoded(rows: Sequence[Any]) -> list[tuple[int, Stored]]:
    return [(seq, _decode(data)) for seq, data in rows]
