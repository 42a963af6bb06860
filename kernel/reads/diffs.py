"""Diff: what differs between two boundaries, of one run or of two runs of one tree.

Two transcripts laid out by segments hold the same message wherever they point at the same
row (one run's row at one index): below their common ancestor (where they part), and
again between the edits of a fork born with edits. A diff reads only the rest, so it
costs what the branches add since they parted, not how long they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import msgspec

from runpoint.core import transcript
from runpoint.core.errors import InvalidBoundary
from runpoint.core.types import Message, Run, RunStatus, Segment, ToolExecution, Usage
from runpoint.reads import continue_points
from runpoint.reads.queries import Queries
from runpoint.seams.storage import Storage

Part = list[tuple[int, Message]]  # messages with their indexes


class Side(msgspec.Struct):
    """One boundary compared: the run, the boundary used (snapped down to a whole one), its
    status then, and what its messages past the common ancestor cost."""

    run: Run
    requested_index: int
    message_index: int
    status: RunStatus
    usage: Usage


class Indexed(msgspec.Struct):
    message_index: int
    message: Message


class Edited(msgspec.Struct):
    """A message one side has where the other has the one it was edited from (or both
    have edits of one message)."""

    base: Indexed
    other: Indexed


class ToolChange(msgspec.Struct):
    """A tool call only one side has (the other None), or both with another outcome."""

    base: ToolExecution | None
    other: ToolExecution | None


class Diff(msgspec.Struct):
    """From `base` to `other`: below `common_index` both hold the same messages."""

    base: Side
    other: Side
    common_index: int
    added: list[Indexed]
    removed: list[Indexed]
    edited: list[Edited]
    tools: list[ToolChange]


async def diff(
    storage: Storage,
    queries: Queries,
    run_id: str,
    message_index: int | None,
    other_run_id: str,
    other_index: int | None,
    *,
    session_id: str | None = None,
    agent_id: str | None = None,
) -> Diff:
    """The difference from `run_id` at `message_index` to `other_run_id` at `other_index`
    (None: a run's end). `session_id` names the first run's session only: the other may be
    a fork in another session (a forked session's)."""
    base_run = await queries.run(run_id, session_id=session_id, agent_id=agent_id)
    other_run = await queries.run(other_run_id, agent_id=agent_id)
    base_at = await _named_index(storage, base_run, message_index)
    other_at = await _named_index(storage, other_run, other_index)
    ranges = parted(base_run.segments, base_at, other_run.segments, other_at)
    base = await _read(storage, base_run, base_at, ranges)
    other = await _read(storage, other_run, other_at, ranges)
    added, removed, edited = _messages(base, other)
    return Diff(
        base=await _side(storage, base_run, message_index, base_at, base),
        other=await _side(storage, other_run, other_index, other_at, other),
        common_index=ranges[0][0] if ranges else min(base_at, other_at),
        added=added,
        removed=removed,
        edited=edited,
        tools=_tools(base, other),
    )


def parted(
    a: Sequence[Segment], a_end: int, b: Sequence[Segment], b_end: int
) -> list[tuple[int, int]]:
    """The index ranges [lo, hi) where transcript `a` (its first `a_end` messages) and `b`
    hold different rows, or only one holds any: where their segments say so, without
    reading a message."""
    pieces = transcript.cut(a, a_end), transcript.cut(b, b_end)
    cuts = {0, a_end, b_end} | {s.start for p in pieces for s in p}
    ranges: list[tuple[int, int]] = []
    for lo, hi in pairwise(sorted(cuts)):
        if _owner(pieces[0], lo) != _owner(pieces[1], lo):
            if ranges and ranges[-1][1] == lo:
                lo = ranges.pop()[0]
            ranges.append((lo, hi))
    return ranges


def _owner(pieces: Sequence[Segment], index: int) -> str | None:
    """Whose row a transcript holds at `index` (None past its end)."""
    return next((s.run_id for s in pieces if s.start <= index < (s.end or 0)), None)


async def _named_index(storage: Storage, run: Run, index: int | None) -> int:
    if index is None:
        index = run.message_count
    if not 0 <= index <= run.message_count:
        raise InvalidBoundary(
            f"message_index {index} is outside run {run.run_id}'s boundaries 0..{run.message_count}"
        )
    whole, _ = await continue_points.whole(storage, run, index)
    return whole


async def _read(storage: Storage, run: Run, end: int, ranges: list[tuple[int, int]]) -> Part:
    """The run's messages in `ranges`, below `end`."""
    part: Part = []
    for lo, hi in ranges:
        if lo < end:
            found = await storage.read_messages(run.segments, min(hi, end), start=lo)
            part += enumerate(found, lo)
    return part


async def _side(storage: Storage, run: Run, requested: int | None, at: int, part: Part) -> Side:
    """A side as its boundary shows it: the status of its checkpoint there (a run's own at
    its end; RUNNING at a boundary that is not a checkpoint), as a snapshot says it."""
    if at == run.message_count:
        status = run.status
    else:
        # the segment holding message at - 1 owns the checkpoint at `at`: one indexed read
        there = await storage.list_checkpoints(transcript.cut(run.segments, at, at - 1), upto=at)
        status = there[-1].status if there else RunStatus.RUNNING
    usage = transcript.total_usage([m for _, m in part])
    return Side(run, run.message_count if requested is None else requested, at, status, usage)


def _messages(base: Part, other: Part) -> tuple[list[Indexed], list[Indexed], list[Edited]]:
    """Messages only `other` has (added), only `base` has (removed), and pairs where one
    replaces the other or both replace one message (edited). One message in both (a row
    both point at, or its copy) is no change."""
    base_ids = {m.id for _, m in base}
    other_ids = {m.id for _, m in other}
    # a message's original: what it replaces, else itself
    originals = {m.replaces or m.id: (i, m) for i, m in base if m.id not in other_ids}
    edited: list[Edited] = []
    paired: set[str] = set()
    for i, m in other:
        if m.id in base_ids:
            continue
        match = originals.get(m.replaces or "") or originals.get(m.id)
        if match is not None and (m.replaces or match[1].replaces):
            edited.append(Edited(Indexed(*match), Indexed(i, m)))
            paired |= {match[1].id, m.id}
    added = [Indexed(i, m) for i, m in other if m.id not in base_ids | paired]
    removed = [Indexed(i, m) for i, m in base if m.id not in other_ids | paired]
    return added, removed, edited


def _tools(base: Part, other: Part) -> list[ToolChange]:
    """Calls (or results) only one side has past the common ancestor, and those whose
    arguments or outcome differ."""
    mine, theirs = _calls(base), _calls(other)
    changes = []
    for call_id in [*mine, *(c for c in theirs if c not in mine)]:
        before, after = mine.get(call_id), theirs.get(call_id)
        if before is None or after is None or _outcome(before) != _outcome(after):
            changes.append(ToolChange(before, after))
    return changes


def _outcome(e: ToolExecution) -> tuple[object, ...]:
    return e.tool_name, e.tool_args, e.result, e.tool_call_error


def _calls(part: Part) -> dict[str, ToolExecution]:
    """The part's tool calls with their results, and the results whose call lies before
    it (at the result's index)."""
    results = {m.tool_call_id: (i, m) for i, m in part if m.role == "tool"}
    found: dict[str, ToolExecution] = {}
    for i, m in part:
        for call in m.tool_calls or ():
            _, result = results.pop(call.id, (i, None))
            found[call.id] = _execution(call.id, call.name, call.arguments, i, result)
    for call_id, (i, result) in results.items():
        found[call_id or ""] = _execution(call_id or "", result.tool_name or "", {}, i, result)
    return found


def _execution(
    call_id: str, name: str, proposed: dict[str, object], index: int, result: Message | None
) -> ToolExecution:
    ran = result.tool_args if result is not None and result.tool_args is not None else proposed
    return ToolExecution(
        tool_call_id=call_id,
        tool_name=name,
        tool_args=dict(ran),
        result=result.content if result else None,
        tool_call_error=result.tool_call_error if result else False,
        message_index=index,
        ruling=result.ruling if result else None,
    )
