"""The model seam: one async method that streams one model turn."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, runtime_checkable

import msgspec

from runpoint.core.types import Message, ToolCall, Usage


class ToolSchema(msgspec.Struct):
    """A tool as a model sees it: name, description, JSON schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(msgspec.Struct):
    instructions: str | None
    messages: list[Message]
    tools: list[ToolSchema]
    # whether anyone watches the turn's deltas: if nobody does, a model may answer whole
    watched: bool = True
    # the model's own memo for one execution, the same dict on each of its turns: work done
    # on a message (its vendor format) is done once, not once per turn
    memo: dict[Any, Any] = msgspec.field(default_factory=dict)


class TextDelta(msgspec.Struct):
    """A piece of assistant text, streamed before the turn is complete."""

    text: str


class ToolCallDelta(msgspec.Struct):
    """A piece of a tool call's JSON arguments, streamed while the model writes them.
    `index` orders the calls of one turn; `id` and `name` come with the first piece."""

    index: int
    arguments: str
    id: str | None = None
    name: str | None = None


# The longest tool call id a model may name (providers' ids are under 100): the id keys the
# durable record of a call, which every storage backend must be able to index (see
# docs/plugins.md). Nor may it hold a U+0000.
MAX_TOOL_CALL_ID_LENGTH = 512


class ModelResponse(msgspec.Struct):
    """A complete model turn: final text and/or a batch of tool calls."""

    content: str | None = None
    tool_calls: list[ToolCall] = []
    usage: Usage | None = None


Chunk = TextDelta | ToolCallDelta | ModelResponse


class Model(Protocol):
    """A chat model. `stream` yields deltas, then exactly one complete ModelResponse
    (the deltas are for watching clients; the loop records only the response)."""

    @property
    def name(self) -> str: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]: ...


@runtime_checkable
class Closable(Protocol):
    """A model that holds connections (a vendor SDK's client): closed when the server
    that made or was given it closes."""

    async def aclose(self) -> None: ...


# A provider turns the part after "provider:" in a model string into a Model.
ModelProvider = Callable[[str], Model]
