"""Pure functions over a run's transcript (a list of messages)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from runpoint.types import Message, Run, Segment, ToolCall, ToolExecution, Usage


def unanswered_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """The tool calls of the last assistant turn that have no result yet."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.role == "assistant":
            answered = {m.tool_call_id for m in messages[i + 1 :] if m.role == "tool"}
            return [c for c in message.tool_calls or () if c.id not in answered]
        if message.role != "tool":
            return []
    return []


def last_turn(messages: Sequence[Message]) -> int:
    """The index of the last assistant message (0 if there is none)."""
    return next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), 0)


def turns_and_batches(messages: Sequence[Message]) -> tuple[int, int]:
    """How many model turns the transcript holds, and how many tool batches with all
    their results."""
    turns = batches = 0
    for message in messages:
        if message.role == "assistant":
            turns += 1
            batches += bool(message.tool_calls)
    return turns, batches - bool(unanswered_calls(messages))


def safe_boundary(messages: Sequence[Message], k: int) -> int:
    """The largest boundary <= k that does not split a tool call from its result."""
    while k > 0:
        cut = messages[:k]
        if not unanswered_calls(cut):
            return k
        # cut just before the assistant turn whose calls are not all answered
        k = max(i for i, m in enumerate(cut) if m.role == "assistant")
    return 0


def final_content(messages: Sequence[Message]) -> str | None:
    """The text of the last assistant message, as a client reads a run's content."""
    for message in reversed(messages):
        if message.role == "assistant" and message.content:
            return message.content
    return None


def total_usage(messages: Sequence[Message]) -> Usage:
    usage = Usage()
    for message in messages:
        if message.usage is not None:
            usage = usage + message.usage
    return usage


def tool_executions(
    messages: Sequence[Message],
    confirmation_required: Mapping[str, bool] | None = None,
    in_doubt: Collection[str] = (),
    start: int = 0,
) -> list[ToolExecution]:
    """Every tool call in the transcript from message `start` on, with its result where it
    has one (a call's result follows it): the arguments it ran with, and the model's where
    a person edited them."""
    results = {m.tool_call_id: m for m in messages[start:] if m.role == "tool"}
    executions = []
    for index in range(start, len(messages)):
        for call in messages[index].tool_calls or ():
            result = results.get(call.id)
            ran_with = result.tool_args if result and result.tool_args is not None else None
            edited = ran_with is not None and ran_with != call.arguments
            needs = (confirmation_required or {}).get(call.name, False)
            executions.append(
                ToolExecution(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    tool_args=ran_with if ran_with is not None else call.arguments,
                    result=result.content if result else None,
                    tool_call_error=result.tool_call_error if result else False,
                    requires_confirmation=needs,
                    in_doubt=call.id in in_doubt,
                    message_index=index,
                    ruling=result.ruling if result else None,
                    proposed_args=call.arguments if edited else None,
                )
            )
    return executions


def preview(message: Message, limit: int = 120) -> str | None:
    """A short, one-line description of a message for timelines."""
    if message.content:
        text = " ".join(message.content.split())
    elif message.tool_calls:
        text = ", ".join(f"{c.name}({_short_args(c.arguments)})" for c in message.tool_calls)
    else:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _short_args(arguments: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in arguments.items())


def cut(segments: Sequence[Segment], index: int, start: int = 0) -> list[Segment]:
    """The segments that lay out messages `start` to `index` (excluded) of a transcript."""
    found = []
    for s in segments:
        lo, hi = max(s.start, start), index if s.end is None else min(s.end, index)
        if lo < hi:
            found.append(Segment(s.run_id, lo, hi))
    return found


def own_indexes(run: Run, count: int) -> range | list[int]:
    """The indexes of the run's last `count` own rows below its `message_count`: where a
    save (or a birth) writes `count` new messages. They are the open tail's last ones,
    but for a fork born with edits, whose own rows also lie between inherited ones."""
    tail = run.segments[-1] if run.segments else None
    if tail is not None and tail.run_id == run.run_id and run.message_count - count >= tail.start:
        return range(run.message_count - count, run.message_count)  # every save
    found: list[int] = []
    for s in reversed(run.segments):
        if s.run_id == run.run_id and len(found) < count:
            end = run.message_count if s.end is None else min(s.end, run.message_count)
            found[:0] = range(max(s.start, end - (count - len(found))), end)
    return found
