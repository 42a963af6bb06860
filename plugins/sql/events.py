"""Each run's event log: the events written together (a group commit, a boundary's) are one
row of compact JSON bytes, keyed by (run_id, the seq of its last event). A row per batch
rather than per event: a fast stream of text deltas, or a batch of a thousand tool calls,
costs a few rows, and the run's id is kept once per batch, not once per token."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
from sqlalchemy import bindparam, func, select

from runpoint.core.types import Run, RunEvent
from runpoint.plugins.sql import team_keys
from runpoint.plugins.sql.appends import Append
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.schema import run_events
from runpoint.plugins.sql.sealing import Codec


class Stored(msgspec.Struct, array_like=True):
    """What a row keeps of an event: the rest is its run's."""

    seq: int
    event: str
    created_at: float
    data: dict[str, Any]


_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(list[Stored]).decode
# each row holds an event past `after`, its last: `limit` rows hold `limit` events at least
_READ = (
    select(run_events.c.seq, run_events.c.data)
    .where(run_events.c.run_id == bindparam("run"), run_events.c.seq > bindparam("after"))
    .order_by(run_events.c.seq)
    .limit(bindparam("limit"))
)
_LAST = select(func.max(run_events.c.seq)).where(run_events.c.run_id == bindparam("run"))


def event_rows(run: Run, events: Sequence[RunEvent], codec: Codec) -> list[tuple[int, bytes]]:
    """The row (last seq, document) of a batch of `run`'s events, as `run_events` keeps
    it; none for no events."""
    if not events:
        return []
    batch = _encode([Stored(e.seq, e.event, e.created_at, e.data) for e in events])
    last = events[-1].seq
    return [(last, codec.seal(batch, run_events.name, "data", run.run_id, last, team=run.team_id))]


class SqlEvents:
    db: Database

    async def append_events(self, run: Run, events: Sequence[RunEvent]) -> bool:
        await team_keys.hold(self.db, run.team_id)
        rows = event_rows(run, events, self.db.codec)
        return await self.db.appends.submit(Append(run, rows))

    async def read_events(self, run: Run, after: int, limit: int) -> list[RunEvent]:
        rows = await self.db.read(_READ, {"run": run.run_id, "after": after, "limit": limit})
        ids = run.run_id, run.session_id, run.agent_id
        found: list[RunEvent] = []
        for last, data in rows:
            for e in _decode(self.db.codec.open(data, run_events.name, "data", run.run_id, last)):
                # past what was read already: a seq stored in an earlier row stands
                if e.seq > (found[-1].seq if found else after):
                    found.append(RunEvent(e.event, *ids, e.created_at, e.data, e.seq))
        return found[:limit]

    async def last_event_seq(self, run_id: str) -> int:
        rows = await self.db.read(_LAST, {"run": run_id})
        return int(rows[0][0] or 0)
