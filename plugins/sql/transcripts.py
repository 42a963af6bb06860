"""Transcripts and checkpoints: a run's boundaries (`save`), its messages, its checkpoints
and its side-effecting tool calls."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import msgspec
from sqlalchemy import Select, and_, bindparam, or_, select, update
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
from runpoint.plugins.sql import packing, packs, team_keys
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
# the last row before `hi` that holds a message of the role from `lo` on, or may: a pack
# with one (packs.roles)
_LAST_INDEX = (
    select(messages.c.run_id, messages.c.idx, messages.c.data, messages.c.n)
    .where(
        messages.c.run_id == bindparam("run"),
        messages.c.idx > bindparam("lo") - packs.WINDOW,
        messages.c.idx < bindparam("hi"),
        or_(
            and_(messages.c.role == bindparam("role"), messages.c.idx >= bindparam("lo")),
            and_(messages.c.n > 1, messages.c.role.contains(bindparam("letter"))),
        ),
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
    rows = packing.packed_rows(run, [(i, m.role, document(m)) for i, m in indexed])
    return Save(
        run,
        state_document(run, codec),
        [(i, role, seal(d, messages.name, "data", run_id, i), n) for i, role, d, n in rows],
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
        else:
            async with self.db.write() as conn:  # a transaction with the key's answer
                await record_answer(conn, answering)
                saved(run, await self.db.write_save(conn, written))
        first = written.messages[0][0] if written.messages else run.message_count
        await packing.pack_settled(self.db, run, first)

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
        rows = await self.db.read(packs.messages_in(len(ranges)), packs.range_values(ranges))
        return [f.document for f in packs.opened(self.db.codec, messages.name, rows, ranges)]

    async def last_index(self, segments: Sequence[Segment], before: int, role: Role) -> int | None:
        for s in reversed(segments):
            if s.start >= before:
                continue
            end = before if s.end is None else min(s.end, before)
            values = {"run": s.run_id, "lo": s.start, "hi": end, "role": role, "letter": role[0]}
            while found := await self.db.read(_LAST_INDEX, values):
                row = found[0]
                if row[3] == 1:
                    return int(row[1])
                document = self.db.codec.open(row[2], messages.name, "data", *row[:2])
                for m in reversed(packs.members(self.db.codec, messages.name, row, document)):
                    if s.start <= m.index < end and packs.role_of(m.document) == role:
                        return m.index
                values["hi"] = row[1]  # none in that pack: the rows before it
        return None

    async def list_checkpoints(
        self, segments: Sequence[Segment], upto: int | None = None
    ) -> list[Checkpoint]:
        ranges = [(s.run_id, s.start, _end(s, upto)) for s in segments]
        if not ranges:
            return []
        rows = await self.db.read(packs.checkpoints_in(len(ranges)), packs.range_values(ranges))
        found = []
        for mark in packs.opened(self.db.codec, checkpoints.name, rows, ranges):
            checkpoint = _decode_checkpoint(mark.document)
            checkpoint.event_seq = mark.seq  # the row's, not the document's
            found.append(checkpoint)
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


@functools.lru_cache(maxsize=64)
def _tool_records(calls: int) -> Select[tuple[str, bytes | None]]:
    t = tool_calls.c
    return select(t.tool_call_id, t.result).where(
        t.run_id == bindparam("run"),
        t.tool_call_id.in_([bindparam(f"call{i}") for i in range(calls)]),
    )
