"""The part of each vendor's answer a turn reads, as msgspec structs.

A single (not streamed) vendor call's body is decoded straight into these: the SDKs' own
pydantic models validate every field of an answer, and building them was most of the CPU a
turn spent in the SDK. The call itself stays the SDK's (`with_raw_response`: its retries,
timeouts and errors). A streamed turn's events are folded into the same structs
(`vendor_events`), so one function makes a runpoint turn of either. Fields absent from an
answer take their defaults, as the SDKs' optional fields do.
"""

from __future__ import annotations

from typing import Any

import msgspec

# -- OpenAI (both APIs) -------------------------------------------------------------


class CachedDetails(msgspec.Struct):
    cached_tokens: int | None = None


# -- OpenAI Responses ---------------------------------------------------------------


class ResponsesUsage(msgspec.Struct):
    input_tokens: int
    output_tokens: int
    input_tokens_details: CachedDetails | None = None


class OutputContent(msgspec.Struct):
    type: str
    text: str = ""


class OutputItem(msgspec.Struct):
    type: str
    call_id: str = ""
    name: str = ""
    arguments: str = ""
    content: list[OutputContent] | None = None  # a message's parts


class ResponseError(msgspec.Struct):
    message: str = ""


class Response(msgspec.Struct):
    status: str | None = None
    error: ResponseError | None = None
    output: list[OutputItem] = []
    usage: ResponsesUsage | None = None

    @property
    def output_text(self) -> str:
        """The text of the output's messages, as the SDK's `Response.output_text`."""
        return "".join(
            part.text
            for item in self.output
            if item.type == "message"
            for part in item.content or ()
            if part.type == "output_text"
        )


# -- OpenAI Chat Completions ----------------------------------------------------------


class Function(msgspec.Struct):
    name: str
    arguments: str


class ChatToolCall(msgspec.Struct):
    id: str
    type: str = "function"
    function: Function | None = None


class ChatMessage(msgspec.Struct):
    content: str | None = None
    tool_calls: list[ChatToolCall] | None = None


class Choice(msgspec.Struct):
    message: ChatMessage


class ChatUsage(msgspec.Struct):
    prompt_tokens: int
    completion_tokens: int
    prompt_tokens_details: CachedDetails | None = None


class ChatCompletion(msgspec.Struct):
    choices: list[Choice]
    usage: ChatUsage | None = None


# -- Anthropic Messages ---------------------------------------------------------------


class ContentBlock(msgspec.Struct):
    type: str
    text: str = ""
    id: str = ""
    name: str = ""
    input: Any = None


class ClaudeUsage(msgspec.Struct):
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class ClaudeMessage(msgspec.Struct):
    content: list[ContentBlock]
    usage: ClaudeUsage
    stop_reason: str | None = None
