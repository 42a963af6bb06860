"""A diff's JSON shape (RunDiff in openapi.yaml), from `runpoint.reads.diffs.Diff`."""

from __future__ import annotations

import msgspec

from runpoint.core.types import Message, MessageView, ToolExecution
from runpoint.reads.diffs import Diff, Indexed, Side

from . import wire


class DiffSideOut(msgspec.Struct):
    run_id: str
    session_id: str
    status: str
    message_index: int
    requested_message_index: int
    metrics: wire.RunMetrics


class IndexedMessageOut(msgspec.Struct):
    message_index: int
    message: wire.MessageOut


class EditedOut(msgspec.Struct):
    base: IndexedMessageOut
    other: IndexedMessageOut


class MessageChangesOut(msgspec.Struct):
    added: list[IndexedMessageOut]
    removed: list[IndexedMessageOut]
    edited: list[EditedOut]


class ToolPairOut(msgspec.Struct):
    base: ToolExecution
    other: ToolExecution


class ToolChangesOut(msgspec.Struct):
    added: list[ToolExecution]
    removed: list[ToolExecution]
    changed: list[ToolPairOut]


class RunDiffOut(msgspec.Struct):
    base: DiffSideOut
    other: DiffSideOut
    common_message_index: int
    messages: MessageChangesOut
    tools: ToolChangesOut


def run_diff(d: Diff) -> RunDiffOut:
    tools = d.tools
    return RunDiffOut(
        base=_side(d.base),
        other=_side(d.other),
        common_message_index=d.common_index,
        messages=MessageChangesOut(
            added=[_indexed(i) for i in d.added],
            removed=[_indexed(i) for i in d.removed],
            edited=[EditedOut(_indexed(e.base), _indexed(e.other)) for e in d.edited],
        ),
        tools=ToolChangesOut(
            added=[t.other for t in tools if t.base is None and t.other is not None],
            removed=[t.base for t in tools if t.other is None and t.base is not None],
            changed=[
                ToolPairOut(t.base, t.other)
                for t in tools
                if t.base is not None and t.other is not None
            ],
        ),
    )


def _side(s: Side) -> DiffSideOut:
    return DiffSideOut(
        run_id=s.run.run_id,
        session_id=s.run.session_id,
        status=s.status,
        message_index=s.message_index,
        requested_message_index=s.requested_index,
        metrics=wire.metrics(s.usage),
    )


def _indexed(i: Indexed) -> IndexedMessageOut:
    return IndexedMessageOut(i.message_index, wire.message(_view(i.message)))


def _view(m: Message) -> MessageView:
    """The message as stored, as a read to be shown has it (a diff holds a few)."""
    return msgspec.json.decode(msgspec.json.encode(m), type=MessageView)
