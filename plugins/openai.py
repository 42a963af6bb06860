"""`openai`: OpenAI models through the official SDK's async client.

``openai:<model>`` uses the Responses API, ``openai-chat:<model>`` Chat Completions; both
read OPENAI_API_KEY and OPENAI_BASE_URL. For per-agent settings give an agent a model
object: ``OpenAIResponses(id="gpt-5.4", temperature=0.2, max_retries=5)``.
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
from runpoint.plugins.vendor_model import VendorModel, as_written, given
from runpoint.seams.model import (
    Chunk,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    TextDelta,
    ToolCallDelta,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI


RESPONSES = "/responses"
CHAT = "/chat/completions"
# how the typed calls authenticate (a bare `post` would offer an admin key too)
BEARER: Any = {"security": {"bearer_auth": True}}


@dataclass
class _OpenAIModel(VendorModel["AsyncOpenAI"]):
    temperature: float | None = None

    sdk = "openai"
    api_key_env = "OPENAI_API_KEY"

    def _make_client(self, **options: Any) -> AsyncOpenAI:
        from openai import AsyncOpenAI

        return AsyncOpenAI(**options)

    def _cache_key(self, request: ModelRequest) -> str | None:
        """The `prompt_cache_key` of a turn: the id of its conversation's first message.

        OpenAI caches every prompt's prefix by itself (from 1,024 tokens on, in steps of
        128), on the machine a request is routed to; requests with one key go to the same
        machines. The prefix is the same from turn to turn, since each message is written
        the same way every time. A session's runs (which carry its history) share their
        first message, and so does a fork with its source: all of them share a key, so a
        fork's prompt reaches the machines that cached its source's."""
        if not self.prompt_cache or not request.messages:
            return None
        return request.messages[0].id


@dataclass
class OpenAIResponses(_OpenAIModel):
    """A model on the Responses API."""

    provider = "openai"
    history = "input"

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        body = given(
            input=vm.responses_input(request.messages, request.memo),
            instructions=request.instructions,
            temperature=self.temperature,
            max_output_tokens=self.max_tokens,
            prompt_cache_key=self._cache_key(request),
        )
        if request.tools:
            body["tools"] = vm.responses_tools(request.tools)
        return as_written(body, model=self.id)

    async def _respond(self, client: AsyncOpenAI, request: ModelRequest) -> ModelResponse:
        from httpx2 import Response

        # the SDK returns its HTTP client's response, unparsed
        raw = await client.post(
            RESPONSES, cast_to=Response, content=self._content(request), options=BEARER
        )
        return vm.from_responses(msgspec.json.decode(raw.content, type=vr.Response))

    async def _stream(self, client: AsyncOpenAI, request: ModelRequest) -> AsyncIterator[Chunk]:
        from openai import AsyncStream

        calls: dict[int, int] = {}  # output item index -> index of the tool call in the turn
        ended: vr.Response | None = None
        stream: AsyncStream[object] = await client.post(
            RESPONSES,
            cast_to=object,
            content=self._content(request, stream=True),
            options=BEARER,
            stream=True,
            stream_cls=AsyncStream[object],  # each event's JSON (`ve`)
        )
        async with stream:
            async for data in stream:
                match ve.read(data, ve.RESPONSE_EVENTS):
                    case ve.OutputTextDelta(delta):
                        yield TextDelta(delta)
                    case ve.OutputItemAdded(index, item) if item.type == "function_call":
                        calls[index] = len(calls)
                        yield ToolCallDelta(len(calls) - 1, item.arguments, item.call_id, item.name)
                    case ve.ArgumentsDelta(index, delta):
                        yield ToolCallDelta(calls[index], delta)
                    case ve.ResponseEnded(response):
                        # read on to the end, which leaves the connection open for the next
                        ended = response
        if ended is None:
            raise vm.MalformedResponse("the response stream ended before the response did")
        yield vm.from_responses(ended)


@dataclass
class OpenAIChat(_OpenAIModel):
    """A model on the Chat Completions API."""

    provider = "openai-chat"
    history = "messages"

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        body = given(
            messages=vm.chat_messages(request.instructions, request.messages, request.memo),
            temperature=self.temperature,
            max_completion_tokens=self.max_tokens,
            prompt_cache_key=self._cache_key(request),
        )
        if request.tools:
            body["tools"] = vm.chat_tools(request.tools)
        return as_written(body, model=self.id, messages=[])

    async def _respond(self, client: AsyncOpenAI, request: ModelRequest) -> ModelResponse:
        from httpx2 import Response

        raw = await client.post(
            CHAT, cast_to=Response, content=self._content(request), options=BEARER
        )
        return vm.from_chat(msgspec.json.decode(raw.content, type=vr.ChatCompletion))

    async def _stream(self, client: AsyncOpenAI, request: ModelRequest) -> AsyncIterator[Chunk]:
        from openai import AsyncStream

        fold = ve.ChatFold()
        stream: AsyncStream[object] = await client.post(
            CHAT,
            cast_to=object,
            content=self._content(request, stream=True, stream_options={"include_usage": True}),
            options=BEARER,
            stream=True,
            stream_cls=AsyncStream[object],  # each chunk's JSON (`ve`)
        )
        async with stream:
            async for data in stream:
                for choice in fold.add(data).choices[:1]:
                    if choice.delta.content:
                        yield TextDelta(choice.delta.content)
                    for call in choice.delta.tool_calls or ():
                        function = call.function or ve.FunctionDelta()
                        yield ToolCallDelta(
                            call.index, function.arguments or "", call.id, function.name
                        )
        yield vm.from_chat(fold.completion())


@hookimpl
def runpoint_model_providers() -> Mapping[str, ModelProvider]:
    return {"openai": OpenAIResponses, "openai-chat": OpenAIChat}
