"""Edits: a fork whose history differs from its source's before the boundary it continues
from. A person replaces the last user message, what a tool call returned, or a call's
arguments (the call then runs again).

The fork keeps every other message where it was, pointing at its source's rows
(copy-on-write); its own rows are only what the edits made, each naming the message it
replaces (`Message.replaces`), laid out between the segments it inherits. Its lineage
(`Run.edits`) says what was edited, where, and by whom.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from runpoint.core import tenancy, transcript
from runpoint.core.errors import InvalidRequest
from runpoint.core.types import Decision, Edit, Message, Run, Segment, ToolCall, new_id, now
from runpoint.runs import tool_calls
from runpoint.seams.agent import Agent
from runpoint.seams.storage import Storage


class ReplaceUserMessage(msgspec.Struct, frozen=True, tag="user_message", tag_field="kind"):
    """Replace the last user message before the boundary."""

    content: str


class ReplaceToolResult(msgspec.Struct, frozen=True, tag="tool_result", tag_field="kind"):
    """Replace what a tool call before the boundary returned."""

    tool_call_id: str
    content: str


class ReplaceToolArguments(msgspec.Struct, frozen=True, tag="tool_arguments", tag_field="kind"):
    """Replace the arguments of a call of the last tool batch before the boundary (which
    must end there), and run the call again with them; the batch's other results stay."""

    tool_call_id: str
    arguments: dict[str, Any]


EditRequest = ReplaceUserMessage | ReplaceToolResult | ReplaceToolArguments


@dataclass
class Birth:
    """How a fork is born: its layout, its own rows below its message count (in index
    order, written with it), its lineage, and the decisions it starts with."""

    segments: list[Segment]
    rows: list[Message]
    message_count: int
    edits: list[Edit]
    decisions: dict[str, Decision]


async def birth(
    storage: Storage,
    agent: Agent,
    source: Run,
    index: int,
    requests: Sequence[EditRequest],
    run_id: str,
    incoming: list[Message],
) -> Birth:
    """A new run `run_id` continuing `source` from its whole boundary `index`, with the
    edits `requests` made to the messages before it and `incoming` (a new input) after."""
    if not requests:
        layout = [*transcript.cut(source.segments, index), Segment(run_id, index)]
        return Birth(layout, incoming, index + len(incoming), [], {})
    found = await _find(storage, source, index, requests)
    reruns = [
        (r, at)
        for r, (at, _) in zip(requests, found, strict=True)
        if isinstance(r, ReplaceToolArguments)
    ]
    arguments = {r.tool_call_id: r.arguments for r, _ in reruns}
    if len(arguments) < len(reruns):
        raise InvalidRequest("two edits replace the arguments of the same call")
    if len({at for _, at in reruns}) > 1:
        raise InvalidRequest("only calls of one turn, the last before the boundary, can run again")
    replaced: dict[int, Message] = {}
    for request, (at, old) in zip(requests, found, strict=True):
        if isinstance(request, ReplaceToolArguments):
            replaced[at] = _edited_turn(agent, old, arguments)
        elif at in replaced:
            raise InvalidRequest(f"two edits replace message {at}")
        else:
            replaced[at] = _edited(request, old)
    tail_start, tail = index, incoming
    if arguments:  # the edited calls run again: the fork ends with their turn
        if incoming:
            raise InvalidRequest(
                "an edit of a call's arguments takes no input: the call runs first"
            )
        tail_start = reruns[0][1]
        tail = await _rerun(storage, source, index, tail_start, replaced, arguments)
    points = sorted(at for at in replaced if at < tail_start)
    segments: list[Segment] = []
    start = 0
    for at in points:
        segments += [*transcript.cut(source.segments, at, start), Segment(run_id, at, at + 1)]
        start = at + 1
    segments += [*transcript.cut(source.segments, tail_start, start), Segment(run_id, tail_start)]
    # where each replacement stands in the fork (a rerun batch's results may move up)
    where = {replaced[at].id: at for at in points}
    where |= {m.id: tail_start + i for i, m in enumerate(tail)}
    principal = tenancy.current()
    edits = [
        Edit(
            kind=request.__struct_config__.tag,  # type: ignore[arg-type]
            message_index=where[replaced[at].id],
            replaced_message_id=old.id,
            message_id=replaced[at].id,
            team_id=principal.team,
            user_id=principal.user,
            tool_call_id=None if isinstance(request, ReplaceUserMessage) else request.tool_call_id,
        )
        for request, (at, old) in zip(requests, found, strict=True)
    ]
    rows = [replaced[at] for at in points] + tail
    return Birth(segments, rows, tail_start + len(tail), edits, dict.fromkeys(arguments, True))


def _accepts(request: EditRequest) -> Callable[[Message], bool]:
    """Which message before the boundary `request` edits: the last one this accepts."""
    if isinstance(request, ReplaceUserMessage):
        return lambda m: m.role == "user"
    if isinstance(request, ReplaceToolResult):
        return lambda m: m.role == "tool" and m.tool_call_id == request.tool_call_id
    return lambda m: any(c.id == request.tool_call_id for c in m.tool_calls or ())


def _missing(request: EditRequest, index: int) -> str:
    if isinstance(request, ReplaceUserMessage):
        return f"the run has no user message before message {index}"
    if isinstance(request, ReplaceToolResult):
        return f"the run has no result of tool call {request.tool_call_id} before message {index}"
    return f"the run has no tool call {request.tool_call_id} before message {index}"


async def _find(
    storage: Storage, source: Run, index: int, requests: Sequence[EditRequest]
) -> list[tuple[int, Message]]:
    """The message each request edits (its index and itself), read back from `index` a
    window at a time, each four times the last: an edit near its boundary reads little."""
    wanted = [_accepts(r) for r in requests]
    found: list[tuple[int, Message] | None] = [None] * len(requests)
    end, size = index, 16
    while end > 0 and None in found:
        start = max(0, end - size)
        window = await storage.read_messages(source.segments, end, start=start)
        for offset in range(len(window) - 1, -1, -1):
            for i, accepts in enumerate(wanted):
                if found[i] is None and accepts(window[offset]):
                    found[i] = (start + offset, window[offset])
        end, size = start, size * 4
    for request, where in zip(requests, found, strict=True):
        if where is None:
            raise InvalidRequest(_missing(request, index))
    return [f for f in found if f is not None]


def _edited(request: ReplaceUserMessage | ReplaceToolResult, old: Message) -> Message:
    """The message a person wrote in place of `old`."""
    if not request.content.strip():
        raise InvalidRequest("an edit's content must not be blank")
    if isinstance(request, ReplaceUserMessage):
        return Message(role="user", content=request.content, replaces=old.id)
    return msgspec.structs.replace(
        old,
        id=new_id(),
        created_at=now(),
        content=request.content,
        tool_call_error=False,
        ruling=None,
        replaces=old.id,
    )


def _edited_turn(agent: Agent, old: Message, arguments: dict[str, dict[str, Any]]) -> Message:
    """`old`, an assistant turn, with the calls `arguments` names given those arguments
    (each checked against its tool's schema). It spent no tokens in the fork."""
    calls = []
    for call in old.tool_calls or ():
        if call.id in arguments:
            tool_calls.check_arguments(agent, call, arguments[call.id])
            call = ToolCall(call.id, call.name, arguments[call.id])
        calls.append(call)
    return msgspec.structs.replace(
        old, id=new_id(), created_at=now(), tool_calls=calls, usage=None, replaces=old.id
    )


async def _rerun(
    storage: Storage,
    source: Run,
    index: int,
    turn_at: int,
    replaced: dict[int, Message],
    arguments: dict[str, dict[str, Any]],
) -> list[Message]:
    """The edited turn at `turn_at` and the results of its batch that stay (edited, if an
    edit says so), up to `index`: the edited calls have none, so the fork runs them."""
    batch = await storage.read_messages(source.segments, index, start=turn_at + 1)
    if any(m.role != "tool" for m in batch) or len(batch) != index - turn_at - 1:
        raise InvalidRequest(
            f"only a call of the last tool batch before message {index} can be run again "
            "with edited arguments"
        )
    for at, message in enumerate(batch, turn_at + 1):
        if at in replaced and message.tool_call_id in arguments:
            raise InvalidRequest(
                f"edit tool call {message.tool_call_id}'s arguments or its result, not both"
            )
    kept = [
        replaced.get(at, message)
        for at, message in enumerate(batch, turn_at + 1)
        if message.tool_call_id not in arguments
    ]
    return [replaced[turn_at], *kept]
