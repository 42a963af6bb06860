"""A streamed turn is read from each event's JSON (plugins/vendor_events), not from the SDK's
models: it reads as the SDK's own streaming helpers read the same stream (content, tool
calls, usage with its cached tokens), and a vendor's error mid-stream is the SDK's."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from runpoint.core.types import Message
from runpoint.plugins import vendor_messages as vm
from runpoint.plugins import vendor_replies as vr
from runpoint.seams.agent import tool
from runpoint.seams.model import ModelRequest, ModelResponse, TextDelta, ToolCallDelta
from tests.providers.conftest import Api, get_population
from tests.providers.loopback import Reply
from tests.providers.wire import Turn

# a prompt long enough for both vendors' caches (over 1,024 tokens of 4 bytes)
LONG = "Quelle est la population de Paris ? " * 150
TURNS = {
    "text": Turn("Paris has 2.1M people, Tokyo 13.9M."),
    "tool calls": Turn(
        None,
        [
            ("call_1", "get_population", {"city": "Paris"}),
            ("call_2", "get_population", {"city": "Tōkyō", "note": "ü\u2028"}),
        ],
    ),
    "text and a call": Turn("Looking up Lagos.", [("call_3", "get_population", {})]),
}


async def sdk_stream(api: Api, arguments: dict[str, Any]) -> ModelResponse:
    """The turn as the SDK's own streaming helper assembles it, read as runpoint reads a
    single call's answer."""
    client = api.model().client()
    if api.provider == "anthropic":
        async with client.messages.stream(**arguments) as stream:
            message = await stream.get_final_message()
        return vm.from_claude(sdk_model(message, vr.ClaudeMessage))
    if api.provider == "openai-chat":
        options = {"include_usage": True}
        async with client.chat.completions.stream(**arguments, stream_options=options) as chat:
            completion = await chat.get_final_completion()
        return vm.from_chat(sdk_model(completion, vr.ChatCompletion))
    async with client.responses.stream(**arguments) as responses:
        response = await responses.get_final_response()
    return vm.from_responses(sdk_model(response, vr.Response))


def sdk_model(model: object, reply: type[Any]) -> Any:
    return msgspec.convert(model, reply, from_attributes=True)


# made once: OpenAI's cache key is the id of the conversation's first message
MESSAGES = [Message(role="system", content=LONG), Message(role="user", content="Paris?")]


def request() -> ModelRequest:
    return ModelRequest(None, MESSAGES, [tool(get_population).schema], watched=True)


def arguments(api: Api) -> dict[str, Any]:
    """The arguments of the SDK's typed call that sends runpoint's request."""
    params = api.model()._params(request())
    return {**params, **params.pop("extra_body")}


@pytest.mark.parametrize("turn", TURNS)
async def test_a_streamed_turn_reads_as_the_sdks_streaming_helper_reads_it(
    api: Api, turn: str
) -> None:
    # the first request writes the prompt to the vendor's cache; the two after read it
    api.server.play(TURNS[turn], TURNS[turn], TURNS[turn])
    model = api.model()
    [*_, first] = [chunk async for chunk in model.stream(request())]
    chunks = [chunk async for chunk in model.stream(request())]

    sdks = await sdk_stream(api, arguments(api))

    *deltas, ours = chunks
    assert isinstance(ours, ModelResponse) and isinstance(first, ModelResponse)
    assert ours.content == sdks.content
    assert ours.tool_calls == sdks.tool_calls
    assert ours.usage == sdks.usage
    assert ours.usage is not None and first.usage is not None
    assert ours.usage.cache_read_tokens > 0 and first.usage.cache_read_tokens == 0
    # the deltas clients saw add up to the turn
    text = "".join(d.text for d in deltas if isinstance(d, TextDelta))
    assert text == (ours.content or "")
    calls = [d for d in deltas if isinstance(d, ToolCallDelta)]
    streamed = {
        index: "".join(d.arguments for d in calls if d.index == index)
        for index in {d.index for d in calls}
    }
    assert [msgspec.json.decode(streamed[i]) for i in sorted(streamed)] == [
        c.arguments for c in ours.tool_calls
    ]
    assert [d.name for d in calls if d.name] == [c.name for c in ours.tool_calls]
    assert ours.tool_calls == [vm.tool_call(i, n, a) for i, n, a in TURNS[turn].calls]


def error_mid_stream(api: Api) -> Reply:
    """A turn's stream that breaks off with the vendor's error event."""
    reply = api.reply(TURNS["text"], stream=True)
    assert reply.events is not None
    if api.provider == "anthropic":
        error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        return Reply(events=[*reply.events[:3], ("error", error)])
    error = {"error": {"message": "The server had an error", "type": "server_error"}}
    return Reply(events=[*reply.events[:3], (None, error)])


async def test_an_error_mid_stream_is_the_one_the_sdk_raises(api: Api) -> None:
    api.server.play(error_mid_stream(api), error_mid_stream(api))

    with pytest.raises(Exception) as ours:
        async for _ in api.model().stream(request()):
            pass
    with pytest.raises(Exception) as sdks:
        await sdk_stream(api, arguments(api))

    assert type(ours.value) is type(sdks.value)
    assert str(ours.value) == str(sdks.value)
    assert "Overloaded" in str(ours.value) or "The server had an error" in str(ours.value)


@pytest.mark.parametrize("cut", [1, 3], ids=["after its start", "mid-way"])
async def test_a_stream_cut_off_is_a_malformed_response(api: Api, cut: int) -> None:
    reply = api.reply(TURNS["tool calls"], stream=True)
    assert reply.events is not None
    api.server.play(Reply(events=reply.events[:cut]))

    with pytest.raises(vm.MalformedResponse):
        async for _ in api.model().stream(request()):
            pass


async def test_a_streamed_turn_reuses_the_connection(api: Api) -> None:
    """A stream is read to its end (a Responses stream goes on past its last event), so the
    next turn's request goes over the same connection."""
    api.server.play(TURNS["text"], TURNS["text"])
    model = api.model()
    for _ in range(2):
        async for _ in model.stream(request()):
            pass

    first, second = api.server.requests
    assert first.peer == second.peer
