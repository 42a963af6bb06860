"""Pure functions over a run's transcript: a list of messages, or of their views (read to
be shown: see `MessageView`), whichever the caller read."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from runpoint.core.types import Args, Message, Ruling, Run, Segment, ToolExecutionOf, Usage

A = TypeVar("A", covariant=True)


class Call(Protocol[A]):
    """A tool call: a `ToolCall`, or a `CallView` whose arguments are their JSON text."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> A: ...


C = TypeVar("C", bound=Call[Any], covariant=True)


class Said(Protocol[C]):
    """A message of a transcript, as these functions read it: a `Message` or a view."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str | None: ...
    @property
    def tool_calls(self) -> Sequence[C] | None: ...
    @property
    def usage(self) -> Usage | None: ...
    @property
    def tool_call_id(self) -> str | None: ...
    @property
    def tool_call_error(self) -> bool: ...
    @property
    def tool_args(self) -> Any: ...  # a result's: as its call's arguments are
    @property
    def ruling(self) -> Ruling | None: ...


CallT = TypeVar("CallT", bound=Call[Any])


def unanswered_calls(messages: Sequence[Said[CallT]], end: int | None = None) -> list[CallT]:
    """The tool calls of the last assistant turn (before message `end`) that have no
    result yet."""
    end = len(messages) if end is None else end
    for i in range(end - 1, -1, -1):
        message = messages[i]
        if message.role == "assistant":
            answered = {m.tool_call_id for m in messages[i + 1 : end] if m.role == "tool"}
            return [c for c in message.tool_calls or () if c.id not in answered]
        if message.role != "tool":
            return []
    return []


def last_turn(messages: Sequence[Said[Call[Any]]], end: int | None = None) -> int:
    """The index of the last assistant message (before message `end`; 0 if there is none)."""
    end = len(messages) if end is None else end
    return next((i for i in range(end - 1, -1, -1) if messages[i].role == "assistant"), 0)


def turns_and_batches(messages: Sequence[Said[Call[Any]]]) -> tuple[int, int]:
    """How many model turns the transcript holds, and how many tool batches with all
    their results."""
    turns = batches = 0
    for message in messages:
        if message.role == "assistant":
            turns += 1
            batches += bool(message.tool_calls)
    return turns, batches - bool(unanswered_calls(messages))


def call_ids(messages: Sequence[Message]) -> set[str]:
    """The ids of the tool calls the transcript's assistant turns made."""
    return {c.id for m in messages if m.role == "assistant" for c in m.tool_calls or ()}


def safe_boundary(messages: Sequence[Said[Call[Any]]], k: int) -> int:
    """The largest boundary <= k that does not split a tool call from its result."""
    while k > 0:
        if not unanswered_calls(messages, k):
            return k
        # cut just before the assistant turn whose calls are not all answered
        k = last_turn(messages, k)
    return 0


def final_content(messages: Sequence[Said[Call[Any]]]) -> str | None:
    """The text of the last assistant message, as a client reads a run's content."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.role == "assistant" and message.content:
            return message.content
    return None


def total_usage(messages: Sequence[Said[Call[Any]]]) -> Usage:
    usage = Usage()
    for message in messages:
        if message.usage is not None:
            usage = usage + message.usage
    return usage


def tool_executions(
    messages: Sequence[Said[Call[Args]]],
    confirmation_required: Mapping[str, bool] | None = None,
    in_doubt: Collection[str] = (),
    start: int = 0,
) -> list[ToolExecutionOf[Args]]:
    """Every tool call in the transcript from message `start` on, with its result where it
    has one (a call's result follows it): the arguments it ran with, and the model's where
    a person edited them."""
    results = {m.tool_call_id: m for m in messages[start:] if m.role == "tool"}
    confirm = confirmation_required or {}
    executions = []
    for index in range(start, len(messages)):
        for call in messages[index].tool_calls or ():
            result = results.get(call.id)
            # what a person's edit ran with, where one did
            ran = result.tool_args if result is not None and result.ruling == "edited" else None
            needs = confirm.get(call.name, False)
            executions.append(
                ToolExecutionOf(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    tool_args=call.arguments if ran is None else ran,
                    result=result.content if result else None,
                    tool_call_error=result.tool_call_error if result else False,
                    requires_confirmation=needs,
                    in_doubt=call.id in in_doubt,
                    message_index=index,
                    ruling=result.ruling if result else None,
                    proposed_args=None if ran is None else call.arguments,
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


def inherited(run: Run) -> list[Segment]:
    """The segments of other runs' rows that the run reads (a fork's, copy-on-write)."""
    return [s for s in run.segments if s.run_id != run.run_id]


def captured(runs: Sequence[Run]) -> list[Segment]:
    """The segments a capture of these runs reads: each run's whole transcript."""
    return [s for run in runs for s in cut(run.segments, run.message_count)]
