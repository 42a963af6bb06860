"""The model seam: one async method that streams one model turn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import msgspec

from runpoint.types import Message, ToolCall, Usage


class ToolSchema(msgspec.Struct):
    """A tool as a model sees it: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(msgspec.Struct):
    instructions: str | None
    messages: list[Message]
    tools: list[ToolSchema]


class TextDelta(msgspec.Struct):
    """A piece of assistant text, streamed before the turn is complete."""

    text: str


class ModelResponse(msgspec.Struct):
    """A complete model turn: final text and/or a batch of tool calls."""

    content: str | None = None
    tool_calls: list[ToolCall] = []
    usage: Usage | None = None


class Model(Protocol):
    """A chat model. `stream` yields text deltas, then exactly one ModelResponse."""

    @property
    def name(self) -> str: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[TextDelta | ModelResponse]: ...


# A provider turns the part after "provider:" in a model string into a Model.
ModelProvider = Callable[[str], Model]
