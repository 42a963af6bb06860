"""`anthropic`: Claude models on the Messages API, through the official SDK's async client.

``anthropic:<model>`` reads ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL; for per-agent
settings give an agent a model object: ``Claude(id="claude-sonnet-4-6", max_tokens=2048)``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from runpoint import hookimpl
from runpoint.plugins import vendor_events as ve
from runpoint.plugins import vendor_messages as vm
from runpoint.plugins import vendor_replies as vr
from runpoint.plugins.vendor_model import VendorModel, as_written
from runpoint.seams.model import (
    Chunk,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallDelta,
)

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

# The Messages API requires a limit; this one is used when the agent sets none.
DEFAULT_MAX_TOKENS = 8192
MESSAGES = "/v1/messages"
# `messages.create` refuses a single call that may take over 10 minutes, reckoning 128,000
# tokens an hour; runpoint streams such a call instead
LONGEST_SINGLE_CALL = 128_000 * 600 // 3600
# a prompt cache entry that lives 5 minutes from its last read (the vendor's default)
EPHEMERAL = {"type": "ephemeral"}
# what `messages.stream` tells the vendor it is
STREAM_HELPER_HEADERS = {
    "X-Stainless-Helper-Method": "stream",
    "X-Stainless-Stream-Helper": "messages",
}


@dataclass
class Claude(VendorModel["AsyncAnthropic"]):
    provider = "anthropic"
    sdk = "anthropic"
    api_key_env = "ANTHROPIC_API_KEY"
    history = "messages"

    def _make_client(self, **options: Any) -> AsyncAnthropic:
        from anthropic import AsyncAnthropic

        return AsyncAnthropic(**options)

    def deprecation(self) -> str | None:
        # `messages.create` warns of these on every call (a DeprecationWarning, which a
        # server never shows); runpoint posts the body itself, and says it once, at start-up
        from anthropic._data import DEPRECATED_MODELS

        end = DEPRECATED_MODELS.get(self.id)
        return None if end is None else f"deprecated: it reaches end-of-life on {end}"

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        body: dict[str, Any] = {"messages": vm.claude_messages(request.messages, request.memo)}
        if system := vm.system_prompt(request.instructions, request.messages, request.memo):
            body["system"] = system
        if request.tools:
            body["tools"] = vm.claude_tools(request.tools)
        if self.prompt_cache:
            mark_breakpoints(body)
        # the SDK reads max_tokens (a single call's timeout grows with it)
        max_tokens = self.max_tokens or DEFAULT_MAX_TOKENS
        return as_written(body, model=self.id, max_tokens=max_tokens, messages=[])

    def _stable(self, items: list[Any]) -> int:
        # the turns marked as breakpoints are copies, marked afresh on each request
        return min(breakpoints(items), default=len(items)) if self.prompt_cache else len(items)

    async def _respond(self, client: AsyncAnthropic, request: ModelRequest) -> ModelResponse:
        from anthropic import DEFAULT_TIMEOUT
        from httpx2 import Response

        if (self.max_tokens or DEFAULT_MAX_TOKENS) > LONGEST_SINGLE_CALL:
            async for chunk in self._stream(client, request):
                if isinstance(chunk, ModelResponse):
                    return chunk
        raw = await client.post(
            MESSAGES,
            cast_to=Response,  # the SDK returns its HTTP client's response, unparsed
            content=self._content(request),
            # as `messages.create`, which names the default timeout in the request's headers
            options={"timeout": DEFAULT_TIMEOUT} if client.timeout == DEFAULT_TIMEOUT else {},
        )
        return vm.from_claude(msgspec.json.decode(raw.content, type=vr.ClaudeMessage))

    async def _stream(self, client: AsyncAnthropic, request: ModelRequest) -> AsyncIterator[Chunk]:
        from anthropic import AsyncStream

        fold = ve.ClaudeFold()
        calls: dict[int, int] = {}  # content block index -> index of the tool call in the turn
        stream: AsyncStream[object] = await client.post(
            MESSAGES,
            cast_to=object,
            content=self._content(request, stream=True),
            options={"headers": STREAM_HELPER_HEADERS},
            stream=True,
            stream_cls=AsyncStream[object],  # each event's JSON (`ve`)
        )
        async with stream:
            async for data in stream:
                if (event := ve.read(data, ve.CLAUDE_EVENTS)) is None:
                    continue
                fold.add(event)
                match event:
                    case ve.BlockStart(index, block) if block.type == "tool_use":
                        calls[index] = len(calls)
                        yield ToolCallDelta(len(calls) - 1, "", block.id, block.name)
                    case ve.BlockDelta(_, ve.Delta("text_delta", text)):
                        yield TextDelta(text)
                    case ve.BlockDelta(index, ve.Delta("input_json_delta", _, json)):
                        yield ToolCallDelta(calls[index], json)
        yield vm.from_claude(fold.final())


def mark_breakpoints(body: dict[str, Any]) -> None:
    """Mark the cache breakpoints of a Messages request (at most three of the four allowed).

    Anthropic caches the prompt's prefix (tools, system, messages, in that order) up to a
    block marked `cache_control`, and a breakpoint reads the longest prefix cached at it or
    at any of the 20 blocks before it. Marked here: the end of the system prompt (or of the
    tools), which every turn of the agent shares; the end of the prompt of the previous
    turn (the user turn before the last assistant turn), which that turn wrote, for a turn
    that added more than 20 blocks; and the end of this prompt, which the next turn (or a
    fork of this run from here) reads. A fork from checkpoint k sends its source's blocks
    up to k as they were, so the lookback from its last breakpoint finds its source's."""
    if "system" in body:
        body["system"] = [{"type": "text", "text": body["system"], "cache_control": EPHEMERAL}]
    elif "tools" in body:
        body["tools"][-1] = body["tools"][-1] | {"cache_control": EPHEMERAL}
    turns = body["messages"]
    for i in breakpoints(turns):
        turns[i] = turns[i] | {"content": _marked_last(turns[i]["content"])}


def breakpoints(turns: list[dict[str, Any]]) -> set[int]:
    """The turns `mark_breakpoints` marks: the end of the previous turn's prompt (the user
    turn before the last assistant turn), and the end of this one."""
    last_answer = next(
        (i for i in range(len(turns) - 1, -1, -1) if turns[i]["role"] == "assistant"), 0
    )
    return {i for i in (last_answer - 1, len(turns) - 1) if i >= 0 and turns[i]["content"]}


def _marked_last(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # the blocks are the memo's (`vm.each_once`): the marked one is a copy
    return [*blocks[:-1], blocks[-1] | {"cache_control": EPHEMERAL}]


@hookimpl
def runpoint_model_providers() -> Mapping[str, ModelProvider]:
    return {"anthropic": Claude}
