"""Each run's event log: the events written together (a group commit, a boundary's) are one
row of compact JSON bytes, keyed by (run_id, the seq of its last event). A row per batch
rather than per event: a fast stream of text deltas, or a batch of a thousand tool calls,
costs a few rows, and the run's id is kept once per batch, not once per token.

What a boundary's events repeat of the rows written with them is kept once: a
`CheckpointCreated` event's checkpoint is its checkpoint row's document, a tool event's
arguments and result are its tool result message's. The event keeps where they are, and a
read puts them back, so it reads exactly what was written. A batch of some size is kept
deflated (its names and keys repeat from event to event: about half its bytes), before it
is sealed."""

from __future__ import annotations

import zlib
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import msgspec
from sqlalchemy import bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.sealing import Codec
from runpoint.core.types import Message, Run, RunEvent
from runpoint.plugins.sql import packs, team_keys
from runpoint.plugins.sql.appends import Append
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.schema import checkpoints, messages, run_events


class Plain(msgspec.Struct, array_like=True):
    """What a row keeps of an event: the rest is its run's."""

    seq: int
    event: str
    created_at: float
    data: dict[str, Any]


class Stored(Plain, array_like=True):
    """An event that left out of `data` what rows written with it hold (see `lean`); a
    `Plain` event reads as one that left out nothing."""

    # data["checkpoint"] is the document of the run's checkpoint at this message index
    checkpoint: int | None = None
    # these keys of data["tool"] are the tool result message at this index's (`_FROM`)
    message: int | None = None
    left: list[str] = []


class _ToolResult(msgspec.Struct):
    """What a tool event repeats of its result message."""

    content: msgspec.Raw = msgspec.Raw(b"null")
    tool_args: msgspec.Raw = msgspec.Raw(b"null")


# a row's batch deflated (raw DEFLATE), told from its JSON ('[') by its first byte, which
# is not a sealed document's either (`runpoint.core.keyring`'s MAGIC and TEAM_MAGIC)
_DEFLATED = b"\x7f"
DEFLATE_FROM = 200  # bytes: a smaller batch gains little, and is kept as it is
_FROM = {"tool_args": "tool_args", "result": "content"}  # a tool event's key: the message's
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder(list[Stored]).decode
_decode_result = msgspec.json.Decoder(_ToolResult).decode
_decode_value = msgspec.json.Decoder().decode
# each row holds an event past `after`, its last: `limit` rows hold `limit` events at least
_READ = (
    select(run_events.c.seq, run_events.c.data)
    .where(run_events.c.run_id == bindparam("run"), run_events.c.seq > bindparam("after"))
    .order_by(run_events.c.seq)
    .limit(bindparam("limit"))
)
_LAST = select(func.max(run_events.c.seq)).where(run_events.c.run_id == bindparam("run"))


class Written(msgspec.Struct, frozen=True):
    """The rows a boundary writes with its events: its new messages (index, message) and
    its checkpoint's (message index, document), as yet unsealed."""

    messages: Sequence[tuple[int, Message]] = ()
    checkpoint: tuple[int, bytes] | None = None


NOTHING = Written()  # an append between boundaries: no rows written with its events


def event_rows(
    run: Run, events: Sequence[RunEvent], codec: Codec, written: Written = NOTHING
) -> list[tuple[int, bytes]]:
    """The row (last seq, document) of a batch of `run`'s events, as `run_events` keeps
    it; none for no events."""
    if not events:
        return []
    results = {m.tool_call_id: (i, m) for i, m in written.messages if m.role == "tool"}
    # one event at a time: none of a wide batch's lean copies outlives its encoding
    leaned = (_encode(lean(e, written.checkpoint, results)) for e in events)
    batch = _pack(b"[" + b",".join(leaned) + b"]")
    last = events[-1].seq
    return [(last, codec.seal(batch, run_events.name, "data", run.run_id, last, team=run.team_id))]


def _pack(batch: bytes) -> bytes:
    if len(batch) < DEFLATE_FROM:
        return batch
    packed = _DEFLATED + zlib.compress(batch, wbits=-15)
    return packed if len(packed) < len(batch) else batch


def batch_of(stored: bytes) -> list[Stored]:
    """A row's events, as `event_rows` kept them (once opened)."""
    return _decode(zlib.decompress(stored[1:], wbits=-15) if stored[:1] == _DEFLATED else stored)


def lean(
    event: RunEvent,
    checkpoint: tuple[int, bytes] | None,
    results: Mapping[str | None, tuple[int, Message]],
) -> Plain:
    """`event` as stored, without what the rows written with it hold (its boundary's
    `checkpoint`, its tool `results` by call id): only what they hold exactly, byte for
    byte, is left out."""
    stored = Stored(event.seq, event.event, event.created_at, event.data)
    data = event.data
    if (
        checkpoint is not None
        and "checkpoint" in data
        and _encode(data["checkpoint"]) == checkpoint[1]
    ):
        stored.data, stored.checkpoint = {**data, "checkpoint": None}, checkpoint[0]
    tool = data.get("tool")
    if isinstance(tool, dict) and (found := results.get(tool.get("tool_call_id"))):
        index, message = found
        left = [
            key
            for key, field in _FROM.items()
            if key in tool and _encode(tool[key]) == _encode(getattr(message, field))
        ]
        if left:
            stored.data = {**stored.data, "tool": {**tool, **dict.fromkeys(left)}}
            stored.message, stored.left = index, left
    return stored if stored.data is not data else _plain(stored)  # else kept as before


def _plain(stored: Plain) -> Plain:
    return Plain(stored.seq, stored.event, stored.created_at, stored.data)


async def inline_checkpoints(
    conn: AsyncConnection, codec: Codec, run_id: str, team: str, indexes: Collection[int]
) -> None:
    """Put the checkpoints of `run_id` (of `team`, its key held) at `indexes` back into the
    events that left them out, in `conn`'s transaction: they are about to be deleted, and
    their events stay."""
    e, ranges = run_events.c, [(run_id, min(indexes) - 1, max(indexes))]
    found = await conn.execute(packs.checkpoints_in(1), packs.range_values(ranges))
    documents = {
        f.index: f.document
        for f in packs.opened(codec, checkpoints.name, found.all(), ranges)
        if f.index in indexes
    }
    rows = await conn.execute(select(e.seq, e.data).where(e.run_id == run_id))
    for last, data in rows.all():
        batch = batch_of(codec.open(data, run_events.name, "data", run_id, last))
        if not any(s.checkpoint in documents for s in batch):
            continue
        for s in batch:
            if s.checkpoint in documents:
                s.data["checkpoint"] = _decode_value(documents[s.checkpoint])
                s.checkpoint = None
        kept = [
            s if s.message is not None or s.checkpoint is not None else _plain(s) for s in batch
        ]
        sealed = codec.seal(_pack(_encode(kept)), run_events.name, "data", run_id, last, team=team)
        await conn.execute(
            update(run_events).where(e.run_id == run_id, e.seq == last).values(data=sealed)
        )


class SqlEvents:
    db: Database

    async def append_events(self, run: Run, events: Sequence[RunEvent]) -> bool:
        await team_keys.hold(self.db, run.team_id)
        rows = event_rows(run, events, self.db.codec)
        return await self.db.appends.submit(Append(run, rows))

    async def read_events(self, run: Run, after: int, limit: int) -> list[RunEvent]:
        rows = await self.db.read(_READ, {"run": run.run_id, "after": after, "limit": limit})
        keyed = [(run.run_id, last, data) for last, data in rows]
        found: list[Stored] = []
        for batch in self.db.codec.open_rows(run_events.name, "data", keyed, 2):  # at once
            for e in batch_of(batch):
                # past what was read already: a seq stored in an earlier row stands
                if e.seq > (found[-1].seq if found else after):
                    found.append(e)
        found = found[:limit]
        await self._restore(run.run_id, found)
        ids = run.run_id, run.session_id, run.agent_id
        return [RunEvent(e.event, *ids, e.created_at, e.data, e.seq) for e in found]

    async def _restore(self, run_id: str, found: list[Stored]) -> None:
        """Put back into `found` what `lean` left out, from the rows that hold it."""
        if marks := [e.checkpoint for e in found if e.checkpoint is not None]:
            documents = await self._documents(checkpoints.name, run_id, min(marks) - 1, max(marks))
            for e in found:
                if e.checkpoint is not None:
                    e.data["checkpoint"] = _decode_value(documents[e.checkpoint])
        if indexes := [e.message for e in found if e.message is not None]:
            documents = await self._documents(messages.name, run_id, min(indexes), max(indexes) + 1)
            for e in found:
                if e.message is not None:
                    result = _decode_result(documents[e.message])
                    tool = e.data["tool"]
                    for key in e.left:
                        tool[key] = _decode_value(getattr(result, _FROM[key]))

    async def _documents(self, table: str, run_id: str, lo: int, hi: int) -> dict[int, bytes]:
        """The documents of a run's messages in [lo, hi), or checkpoints in (lo, hi]."""
        ranges = [(run_id, lo, hi)]
        query = packs.messages_in(1) if table == messages.name else packs.checkpoints_in(1)
        rows = await self.db.read(query, packs.range_values(ranges))
        return {f.index: f.document for f in packs.opened(self.db.codec, table, rows, ranges)}

    async def last_event_seq(self, run_id: str) -> int:
        rows = await self.db.read(_LAST, {"run": run_id})
        return int(rows[0][0] or 0)
