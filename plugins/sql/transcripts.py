"""Transcripts and checkpoints: a run's boundaries (`save`), its messages, its checkpoints
and its side-effecting tool calls."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import msgspec
from sqlalchemy import BindParameter, ColumnElement, Select, and_, bindparam, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core import transcript
from runpoint.core.errors import Conflict
from runpoint.core.sealing import Codec
from runpoint.core.types import (
    Checkpoint,
    KeyAnswer,
    Message,
    MessageView,
    Role,
    Run,
    RunEvent,
    Segment,
)
from runpoint.plugins.sql import team_keys
from runpoint.plugins.sql.database import NO_END, Database, Save
from runpoint.plugins.sql.documents import document
from runpoint.plugins.sql.events import Written, event_rows
from runpoint.plugins.sql.idempotency import record_answer
from runpoint.plugins.sql.run_rows import state_document
from runpoint.plugins.sql.schema import checkpoints, messages, runs, tool_calls

_decode_message = msgspec.json.Decoder(Message).decode
_decode_view = msgspec.json.Decoder(MessageView).decode
_decode_checkpoint = msgspec.json.Decoder(Checkpoint).decode
_RECORD_RESULT = (
    update(tool_calls)
    .where(tool_calls.c.run_id == bindparam("run"), tool_calls.c.tool_call_id == bindparam("call"))
    .values(result=bindparam("document"))
)
_LAST_INDEX = (
    select(messages.c.idx)
    .where(
        messages.c.run_id == bindparam("run"),
        messages.c.idx >= bindparam("lo"),
        messages.c.idx < bindparam("hi"),
        messages.c.role == bindparam("role"),
    )
    .order_by(messages.c.idx.desc())
    .limit(1)
)


def encoded_save(
    run: Run,
    new_messages: Sequence[Message],
    checkpoint: Checkpoint | None,
    codec: Codec,
    intents: Sequence[str] = (),
    events: Sequence[RunEvent] = (),
) -> Save:
    """What `save` writes, encoded (and sealed, with a keyring)."""
    indexed = list(zip(transcript.own_indexes(run, len(new_messages)), new_messages, strict=True))
    run_id, team = run.run_id, run.team_id
    seal = functools.partial(codec.seal, team=team)
    mark = None if checkpoint is None else (checkpoint.message_index, document(checkpoint))
    return Save(
        run,
        state_document(run, codec),
        [(i, m.role, seal(document(m), messages.name, "data", run_id, i)) for i, m in indexed],
        None
        if mark is None
        else (mark[0], seal(mark[1], checkpoints.name, "data", run_id, mark[0])),
        intents,
        # what the events repeat of these rows is kept in the rows alone
        event_rows(run, events, codec, Written(indexed, mark)),
    )


def saved(run: Run, cancel_requested: bool | None) -> None:
    """`run` as its boundary left it (None: refused, another writer changed the run)."""
    if cancel_requested is None:
        raise Conflict(f"run {run.run_id} was changed by another writer")
    run.saved(run.revision + 1, cancel_requested)


async def write_save(
    db: Database,
    conn: AsyncConnection,
    run: Run,
    new_messages: Sequence[Message],
    checkpoint: Checkpoint | None,
) -> None:
    """`save` in a caller's transaction."""
    saved(run, await db.write_save(conn, encoded_save(run, new_messages, checkpoint, db.codec)))


class SqlTranscripts:
    db: Database

    async def save(
        self,
        run: Run,
        messages: Sequence[Message],
        checkpoint: Checkpoint | None,
        *,
        intents: Sequence[str] = (),
        answering: KeyAnswer | None = None,
        events: Sequence[RunEvent] = (),
    ) -> None:
        await team_keys.hold(self.db, run.team_id)
        written = encoded_save(run, messages, checkpoint, self.db.codec, intents, events)
        if answering is None:  # a write of its own, maybe with other runs' (database.py)
            unsure = self.db.unsure.pop(run.run_id, None) == run.revision
            try:
                cancel_requested = await self.db.save(written)
            except Exception:
                self.db.unsure[run.run_id] = run.revision
                raise
            if cancel_requested is None and unsure:
                cancel_requested = await self._landed(written)
            saved(run, cancel_requested)
            return
        async with self.db.write() as conn:  # a transaction with the key's answer
            await record_answer(conn, answering)
            saved(run, await self.db.write_save(conn, written))

    async def _landed(self, written: Save) -> bool | None:
        """The run's `cancel_requested` if the save that failed before this one (its answer
        lost with its connection) was written after all: the run is one revision on, with
        this save's state; else None (another writer's change)."""
        run, codec = written.run, self.db.codec
        found = await self.db.read(
            select(runs.c.revision, runs.c.cancel_requested, runs.c.state).where(
                runs.c.run_id == run.run_id
            )
        )
        if not found or found[0][0] != run.revision + 1:
            return None
        stored, ours = (
            codec.open(s, runs.name, "state", run.run_id) for s in (found[0][2], written.state)
        )
        return bool(found[0][1]) if stored == ours else None

    async def read_messages(
        self, segments: Sequence[Segment], upto: int, start: int = 0
    ) -> list[Message]:
        return [_decode_message(d) for d in await self._message_documents(segments, upto, start)]

    async def read_views(
        self, segments: Sequence[Segment], upto: int, start: int = 0
    ) -> list[MessageView]:
        return [_decode_view(d) for d in await self._message_documents(segments, upto, start)]

    async def _message_documents(
        self, segments: Sequence[Segment], upto: int, start: int
    ) -> list[bytes]:
        ranges = [
            (s.run_id, max(s.start, start), _end(s, upto))
            for s in segments
            if s.start < upto and _end(s, None) > start
        ]
        if not ranges:
            return []
        rows = await self.db.read(_messages_in(len(ranges)), _range_values(ranges))
        return self.db.codec.open_rows(messages.name, "data", rows, 2)

    async def last_index(self, segments: Sequence[Segment], before: int, role: Role) -> int | None:
        for s in reversed(segments):
            if s.start >= before:
                continue
            end = before if s.end is None else min(s.end, before)
            values = {"run": s.run_id, "lo": s.start, "hi": end, "role": role}
            if found := await self.db.read(_LAST_INDEX, values):
                return int(found[0][0])
        return None

    async def list_checkpoints(
        self, segments: Sequence[Segment], upto: int | None = None
    ) -> list[Checkpoint]:
        ranges = [(s.run_id, s.start, _end(s, upto)) for s in segments]
        if not ranges:
            return []
        rows = await self.db.read(_checkpoints_in(len(ranges)), _range_values(ranges))
        opened = self.db.codec.open_rows(checkpoints.name, "data", rows, 2)
        found = [_decode_checkpoint(d) for d in opened]
        for checkpoint, (*_, seq) in zip(found, rows, strict=True):
            checkpoint.event_seq = seq  # the row's, not the document's
        return found

    async def record_tool_results(self, run_id: str, results: Sequence[Message]) -> None:
        if not results:
            return
        if (team := await team_keys.hold_for(self.db, team_keys.OF_RUN, run_id)) is None:
            return  # the run went, and its calls' records with it
        seal = self.db.codec.seal
        rows = [
            {
                "run": run_id,
                "call": r.tool_call_id,
                "document": seal(
                    document(r), tool_calls.name, "result", run_id, r.tool_call_id, team=team
                ),
            }
            for r in results
        ]
        async with self.db.write() as conn:  # one transaction, its rows sent at once
            await conn.execute(_RECORD_RESULT, rows)

    async def tool_records(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> dict[str, Message | None]:
        if not tool_call_ids:
            return {}
        values = {"run": run_id} | {f"call{i}": c for i, c in enumerate(tool_call_ids)}
        rows = await self.db.read(_tool_records(len(tool_call_ids)), values)
        codec = self.db.codec
        return {
            i: None
            if r is None
            else _decode_message(codec.open(r, "tool_calls", "result", run_id, i))
            for i, r in rows
        }


def _end(segment: Segment, upto: int | None) -> int:
    """Where a segment ends, cut at `upto`."""
    return min((e for e in (segment.end, upto) if e is not None), default=NO_END)


def _range_values(ranges: Sequence[tuple[str, int, int]]) -> dict[str, object]:
    values: dict[str, object] = {}
    for i, (run_id, lo, hi) in enumerate(ranges):
        values |= {f"run{i}": run_id, f"lo{i}": lo, f"hi{i}": hi}
    return values


def _in_ranges(
    run_id: ColumnElement[str],
    within: Callable[[BindParameter[int], BindParameter[int]], ColumnElement[bool]],
    ranges: int,
) -> ColumnElement[bool]:
    """`(run_id = :run0 AND within(:lo0, :hi0)) OR ...`, one per range."""
    return or_(
        *(
            and_(run_id == bindparam(f"run{i}"), within(bindparam(f"lo{i}"), bindparam(f"hi{i}")))
            for i in range(ranges)
        )
    )


# One statement object per number of ranges, so each is compiled once (see compiled.py).
@functools.lru_cache(maxsize=64)
def _messages_in(ranges: int) -> Select[tuple[str, int, bytes]]:
    m = messages.c
    where = _in_ranges(m.run_id, lambda lo, hi: and_(m.idx >= lo, m.idx < hi), ranges)
    return select(m.run_id, m.idx, m.data).where(where).order_by(m.idx)


@functools.lru_cache(maxsize=64)
def _checkpoints_in(ranges: int) -> Select[tuple[str, int, bytes, int]]:
    # a segment's checkpoints lie in (start, end]: the one at a fork point is its source's
    c = checkpoints.c
    where = _in_ranges(
        c.run_id, lambda lo, hi: and_(c.message_index > lo, c.message_index <= hi), ranges
    )
    return (
        select(c.run_id, c.message_index, c.data, c.event_seq)
        .where(where)
        .order_by(c.message_index)
    )


@functools.lru_cache(maxsize=64)
def _tool_records(calls: int) -> Select[tuple[str, bytes | None]]:
    t = tool_calls.c
    return select(t.tool_call_id, t.result).where(
        t.run_id == bindparam("run"),
        t.tool_call_id.in_([bindparam(f"call{i}") for i in range(calls)]),
    )
