"""The events of a streamed turn as msgspec structs, and what folds them into its answer.

The SDK still makes the call and reads its stream: retries, timeouts, the Server-Sent
Events and the errors a vendor sends mid-stream (which raise the SDK's own exceptions) stay
the SDK's. It is asked for each event's JSON as it parsed it (`AsyncStream[object]`), not
for its pydantic models, whose building was most of a streamed turn's CPU; the events a
turn reads are converted into these structs, the others skipped. What the SDK's stream
helpers assemble (`ChatCompletionStreamState`, Anthropic's `accumulate_event`) is folded
here into `vendor_replies`' structs, which make a runpoint turn as a single call's do.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from runpoint.plugins import vendor_replies as vr
from runpoint.plugins.vendor_messages import MalformedResponse

S = TypeVar("S", bound=msgspec.Struct)


def read(data: object, kinds: dict[str, type[S]]) -> S | None:
    """The event `data` as the struct of its `type`; None for an event a turn skips."""
    kind = kinds.get(data.get("type")) if isinstance(data, dict) else None  # type: ignore[arg-type]
    return None if kind is None else msgspec.convert(data, kind)


# -- OpenAI Responses -----------------------------------------------------------------


class OutputTextDelta(msgspec.Struct):
    delta: str


class OutputItemAdded(msgspec.Struct):
    output_index: int
    item: vr.OutputItem


class ArgumentsDelta(msgspec.Struct):
    output_index: int
    delta: str


class ResponseEnded(msgspec.Struct):
    response: vr.Response


RESPONSE_EVENTS: dict[str, type[msgspec.Struct]] = {
    "response.output_text.delta": OutputTextDelta,
    "response.output_item.added": OutputItemAdded,
    "response.function_call_arguments.delta": ArgumentsDelta,
    "response.completed": ResponseEnded,
    "response.incomplete": ResponseEnded,
    "response.failed": ResponseEnded,
}


# -- OpenAI Chat Completions ----------------------------------------------------------


class FunctionDelta(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(msgspec.Struct):
    index: int
    id: str | None = None
    function: FunctionDelta | None = None


class MessageDelta(msgspec.Struct):
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChunkChoice(msgspec.Struct):
    delta: MessageDelta
    finish_reason: str | None = None


class ChatChunk(msgspec.Struct):
    choices: list[ChunkChoice] = []
    usage: vr.ChatUsage | None = None


class ChatFold:
    """A completion's chunks folded into the completion (the SDK's stream state)."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, tuple[str, str, list[str]]] = {}  # index -> id, name, pieces
        self.usage: vr.ChatUsage | None = None
        self.finished = False

    def add(self, data: object) -> ChatChunk:
        chunk = msgspec.convert(data, ChatChunk)
        self.usage = chunk.usage or self.usage
        for choice in chunk.choices[:1]:
            self.finished = self.finished or choice.finish_reason is not None
            if choice.delta.content:
                self.text.append(choice.delta.content)
            for call in choice.delta.tool_calls or ():
                function = call.function or FunctionDelta()
                if call.index not in self.calls:  # its first delta names it
                    self.calls[call.index] = (call.id or "", function.name or "", [])
                self.calls[call.index][2].append(function.arguments or "")
        return chunk

    def completion(self) -> vr.ChatCompletion:
        if not self.finished:
            raise MalformedResponse("the completion stream ended before the completion did")
        calls = [
            vr.ChatToolCall(call_id, function=vr.Function(name, "".join(pieces)))
            for _, (call_id, name, pieces) in sorted(self.calls.items())
        ]
        message = vr.ChatMessage("".join(self.text) or None, calls or None)
        return vr.ChatCompletion([vr.Choice(message)], self.usage)


# -- Anthropic Messages -----------------------------------------------------------------


class MessageStart(msgspec.Struct):
    message: vr.ClaudeMessage


class BlockStart(msgspec.Struct):
    index: int
    content_block: vr.ContentBlock


class BlockDelta(msgspec.Struct):
    index: int
    delta: Delta


class Delta(msgspec.Struct):
    type: str
    text: str = ""
    partial_json: str = ""


class StopDelta(msgspec.Struct):
    stop_reason: str | None = None


class DeltaUsage(msgspec.Struct):
    # a message_delta's counts are totals; the ones it leaves out keep message_start's
    output_tokens: int
    input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class MessageEnd(msgspec.Struct):  # a "message_delta": how the message stopped
    delta: StopDelta
    usage: DeltaUsage


CLAUDE_EVENTS: dict[str, type[msgspec.Struct]] = {
    "message_start": MessageStart,
    "content_block_start": BlockStart,
    "content_block_delta": BlockDelta,
    "message_delta": MessageEnd,
}


class ClaudeFold:
    """A message's events folded into the message (the SDK's `accumulate_event`)."""

    def __init__(self) -> None:
        self.message: vr.ClaudeMessage | None = None
        self.inputs: dict[int, list[str]] = {}  # block index -> its input's JSON, in pieces

    def add(self, event: msgspec.Struct) -> None:
        if isinstance(event, MessageStart):
            self.message = event.message
            return
        message = self.message
        if message is None:
            raise MalformedResponse("the message stream did not start with message_start")
        if isinstance(event, BlockStart):
            message.content.append(event.content_block)
        elif isinstance(event, BlockDelta):
            if event.delta.type == "text_delta":
                message.content[event.index].text += event.delta.text
            elif event.delta.type == "input_json_delta":
                self.inputs.setdefault(event.index, []).append(event.delta.partial_json)
        elif isinstance(event, MessageEnd):
            message.stop_reason = event.delta.stop_reason
            usage, counts = message.usage, event.usage
            usage.output_tokens = counts.output_tokens
            for name in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
                if (count := getattr(counts, name)) is not None:
                    setattr(usage, name, count)

    def final(self) -> vr.ClaudeMessage:
        if self.message is None:
            raise MalformedResponse("the message stream ended before it started")
        for index, pieces in self.inputs.items():
            if text := "".join(pieces):  # none: the input of content_block_start, `{}`
                self.message.content[index].input = msgspec.json.decode(text)
        return self.message
