"""What a turn costs on the way to the vendor: the body runpoint writes is sent as it is
(not walked by the SDK's typed-parameter transform) and is what the typed call would send;
each message is converted once per execution, and the history encoded once (the bytes
unchanged); one SDK client serves every run of a model string in an event loop, and each
loop has its own; a server's close closes them; and a turn nobody watches is one plain
vendor call."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from runpoint.core.types import Message, RunStatus, ToolCall
from runpoint.facade import ContinueRun, CreateRun
from runpoint.plugins import vendor_messages as vm
from runpoint.plugins.anthropic import Claude
from runpoint.plugins.openai import OpenAIChat, OpenAIResponses
from runpoint.plugins.vendor_model import VendorModel
from runpoint.seams.agent import tool
from runpoint.seams.model import ModelRequest, ModelResponse
from tests.conftest import OpenRunpoint
from tests.providers.conftest import Api, get_population, travel_agent
from tests.providers.loopback import Request
from tests.providers.wire import Turn

HISTORY = [
    Message(role="system", content="Answer in French."),
    Message(role="user", content="Populations de Paris et de l'Atlantide ? Merci ✓"),
    Message(
        role="assistant",
        content="Je cherche.",
        tool_calls=[
            ToolCall("call:1", "get_population", {"city": "Paris"}),
            ToolCall("call_2", "get_population", {"city": "Atlantis", "note": "ü\u2028"}),
        ],
    ),
    Message(role="tool", content="2.1M", tool_call_id="call:1"),
    Message(role="tool", content="LookupError", tool_call_id="call_2", tool_call_error=True),
    Message(role="assistant", tool_calls=[ToolCall("call_3", "get_population", {})]),
    Message(role="tool", content="13.9M", tool_call_id="call_3"),
    Message(role="user", content="Et maintenant ?"),
]


def typed_call(api: Api, client: Any) -> Any:
    """The SDK's typed method for this API's turns."""
    if api.provider == "openai":
        return client.responses.create
    if api.provider == "openai-chat":
        return client.chat.completions.create
    return client.messages.create


async def test_the_body_sent_as_written_is_the_one_the_typed_call_sends(api: Api) -> None:
    model = api.model(
        max_tokens=256, **({"temperature": 0.5} if api.provider != "anthropic" else {})
    )
    request = ModelRequest(
        instructions="Use get_population.",
        messages=HISTORY,
        tools=[tool(get_population).schema],
        watched=False,
    )
    api.server.play(Turn("Voilà."), Turn("Voilà."))

    [*_, response] = [chunk async for chunk in model.stream(request)]
    arguments = model._params(request)
    body = arguments.pop("extra_body")
    await typed_call(api, model.client())(**arguments | body)  # the SDK transforms it all

    as_written, typed = (r.body for r in api.server.requests)
    assert as_written == typed
    assert "Merci ✓" in str(as_written) and "stream" not in as_written
    assert isinstance(response, ModelResponse) and response.content == "Voilà."


@pytest.mark.parametrize("watched", [True, False], ids=["streamed", "one call"])
async def test_the_anthropic_sdk_sends_the_body_without_copying_it(
    apis: dict[str, Api], watched: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anthropic._utils._prepare import async_prepare_request_data as prepare

    copied: list[object] = []  # what the SDK walked and copied, request by request

    async def recorded(data: object, **options: Any) -> Any:
        copied.append(data)
        return await prepare(data, **options)

    monkeypatch.setattr("anthropic._base_client.async_prepare_request_data", recorded)
    api = apis["anthropic"]
    request = ModelRequest(None, HISTORY, [tool(get_population).schema], watched=watched)
    api.server.play(Turn("Voilà."))

    [*_, response] = [chunk async for chunk in api.model().stream(request)]

    assert isinstance(response, ModelResponse) and response.content == "Voilà."
    [sent] = api.server.requests
    assert "Merci ✓" in str(sent.body["messages"]) and bool(sent.body.get("stream")) is watched
    assert copied == [None]  # one request, and no body for the SDK to copy


def test_each_message_is_converted_once_per_execution() -> None:
    memo: dict[Any, Any] = {}
    first = vm.responses_input(HISTORY[:4], memo)
    later = vm.responses_input(HISTORY, memo)  # a later turn of the same execution

    assert later == vm.responses_input(HISTORY)
    assert all(a is b for a, b in zip(first, later, strict=False))  # not made again
    # a turn's blocks are joined in lists of its own: the memo's are left as they were
    assert vm.claude_messages(HISTORY, memo) == vm.claude_messages(HISTORY, memo)
    assert vm.claude_messages(HISTORY, memo) == vm.claude_messages(HISTORY)
    assert vm.chat_messages("Hi", HISTORY, memo) == vm.chat_messages("Hi", HISTORY)


@pytest.mark.parametrize(
    "model",
    [OpenAIResponses("gpt-5.4"), OpenAIChat("gpt-4o"), Claude("claude-sonnet-4-6")],
    ids=["openai", "openai-chat", "anthropic"],
)
def test_a_history_encoded_once_an_execution_sends_the_bytes_of_the_whole(
    model: VendorModel[Any],
) -> None:
    """Each turn of an execution resends the history; the items the next request starts
    with are encoded once, and the body is byte for byte the one encoded whole (the prefix
    a vendor caches), Claude's breakpoints moving along the turns included."""
    memo: dict[Any, Any] = {}
    tools = [tool(get_population).schema]
    for n in range(1, len(HISTORY) + 1):
        turn = ModelRequest("Be brief.", HISTORY[:n], tools, watched=True, memo=memo)
        whole = ModelRequest("Be brief.", HISTORY[:n], tools, watched=True, memo={})
        assert model._content(turn, stream=True) == model._content(whole, stream=True)
    # a fork of the execution's transcript (another history): encoded anew
    other = [HISTORY[0], Message(role="user", content="Autre chose ?")]
    forked = ModelRequest(None, other, tools, watched=True, memo=memo)
    assert model._content(forked) == model._content(
        ModelRequest(None, other, tools, watched=True, memo={})
    )


@pytest.fixture
def made(api: Api, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The SDK clients the API's model class makes, as it makes them."""
    made: list[object] = []
    make_client = api.model_class._make_client

    def counted(self: Any, **options: Any) -> object:
        made.append(client := make_client(self, **options))
        return client

    monkeypatch.setattr(api.model_class, "_make_client", counted)
    return made


async def test_one_sdk_client_serves_every_run_of_a_model_string(
    api: Api, made: list[object], open_runpoint: OpenRunpoint
) -> None:
    runpoint = await open_runpoint([travel_agent(api.spec)])
    api.server.play(Turn("One."), Turn("Two."), Turn("Three."))

    first = await (
        await runpoint.create_run(CreateRun(agent_id="travel", message="Hello"))
    ).result()
    second = await (
        await runpoint.create_run(CreateRun(agent_id="travel", message="Hello again"))
    ).result()
    switched = await (
        await runpoint.continue_run(ContinueRun(run_id=first.run_id, input="And?", model=api.spec))
    ).result()

    assert [r.content for r in (first, second, switched)] == ["One.", "Two.", "Three."]
    assert len(made) == 1


async def test_each_event_loop_a_model_serves_has_a_client_of_its_own(
    api: Api, made: list[object]
) -> None:
    """The SDK's aiohttp connections belong to the event loop that made them: a model used
    in a second loop (another server in the same process) makes a client there, and the
    first loop's client goes on serving the first."""
    model = api.model()
    api.server.play(Turn("Un."), Turn("Deux."), Turn("Trois."))
    request = ModelRequest(None, HISTORY, [], watched=False)

    async def turn(close: bool = False) -> str | None:
        [*_, response] = [chunk async for chunk in model.stream(request)]
        if close:
            await model.aclose()
        return response.content  # type: ignore[union-attr]

    first = await turn()
    elsewhere = await asyncio.to_thread(asyncio.run, turn(close=True))
    again = await turn()
    assert [first, elsewhere, again] == ["Un.", "Deux.", "Trois."]
    assert len(made) == 2


async def test_a_model_let_go_closes_its_client(api: Api) -> None:
    """A model nobody closes (the host keeps MODELS_KEPT and lets older ones go) closes its
    client once it is collected, rather than leave aiohttp to log it as unclosed."""
    model = api.model()
    api.made.clear()  # this test holds the only reference
    api.server.play(Turn("Un."))
    [*_, response] = [c async for c in model.stream(ModelRequest(None, HISTORY, []))]
    client = model.client()
    assert isinstance(response, ModelResponse) and not client.is_closed()

    del model
    gc.collect()
    for _ in range(3):  # the close is scheduled on the loop, then awaits the session's
        await asyncio.sleep(0)
    assert client.is_closed()


async def test_a_server_closes_its_models_clients(api: Api, open_runpoint: OpenRunpoint) -> None:
    runpoint = await open_runpoint([travel_agent(api.spec)])
    api.server.play(Turn("One."))
    run = await (await runpoint.create_run(CreateRun(agent_id="travel", message="Hi"))).result()
    client = runpoint.host.model(api.spec).client()  # type: ignore[attr-defined]
    assert run.content == "One." and not client.is_closed()

    await runpoint.close()
    assert client.is_closed()


@pytest.mark.parametrize("watched", [True, False], ids=["watched", "unwatched"])
async def test_the_vendor_call_is_streamed_only_when_a_client_streams_the_run(
    api: Api, watched: bool, open_runpoint: OpenRunpoint
) -> None:
    runpoint = await open_runpoint([travel_agent(api.model())])  # a streaming model
    api.server.play(Turn("Paris has 2.1M people."))

    handle = await runpoint.create_run(
        CreateRun(agent_id="travel", message="Population of Paris?"), stream=watched
    )
    if watched:
        text = [e.data["content"] async for e in handle.events() if e.event == "RunContent"]
        assert len(text) > 1  # as the vendor streamed it
    run = await handle.result()

    assert run.status is RunStatus.COMPLETED, run.error
    assert run.content == "Paris has 2.1M people."
    assert bool(api.server.requests[0].body.get("stream")) is watched


@pytest.mark.parametrize("watched", [True, False], ids=["streamed", "one call"])
async def test_the_anthropic_request_has_the_headers_of_the_sdks_own_call(
    apis: dict[str, Api], watched: bool
) -> None:
    """The helper method's telemetry headers and the read timeout (which the SDK works out
    for a single call from max_tokens) are those of `messages.stream` or `.create`."""
    api = apis["anthropic"]
    model = api.model(max_tokens=1024)
    arguments = await turn_and_its_arguments(api, model, watched)
    if watched:
        async with model.client().messages.stream(**arguments) as stream:
            await stream.get_final_message()
    else:
        await model.client().messages.create(**arguments)

    ours, sdks = api.server.requests
    assert headers(ours) == headers(sdks)


@pytest.mark.parametrize("provider", ["openai", "openai-chat"])
@pytest.mark.parametrize("watched", [True, False], ids=["streamed", "one call"])
async def test_an_openai_request_is_the_one_of_the_sdks_typed_call(
    apis: dict[str, Api], provider: str, watched: bool
) -> None:
    """runpoint posts its encoded body through the client (`VendorModel._content`): the
    headers and the body are those of `responses.create` or `chat.completions.create`."""
    api = apis[provider]
    model = api.model()
    arguments = await turn_and_its_arguments(api, model, watched)
    if watched:
        arguments["stream"] = True
        if provider == "openai-chat":
            arguments["stream_options"] = {"include_usage": True}
    answer = await typed_call(api, model.client())(**arguments)
    if watched:
        async for _ in answer:
            pass

    ours, sdks = api.server.requests
    assert ours.body == sdks.body
    assert headers(ours) == headers(sdks)


async def turn_and_its_arguments(api: Api, model: Any, watched: bool) -> dict[str, Any]:
    """One turn through `model` (the vendor records its request), and the arguments of the
    SDK's typed call for the same request, to be made and compared with it."""
    request = ModelRequest(None, HISTORY, [tool(get_population).schema], watched=watched)
    api.server.play(Turn("Voilà."), Turn("Voilà."))
    [*_, response] = [chunk async for chunk in model.stream(request)]
    assert isinstance(response, ModelResponse) and response.content == "Voilà."
    arguments = model._params(request)
    body = arguments.pop("extra_body")
    return {**arguments, **body}


def headers(request: Request) -> dict[str, str]:
    """A request's headers but its length (the SDK's JSON spaces differ from msgspec's)."""
    return {k: v for k, v in request.headers.items() if k != "content-length"}


async def test_a_claude_call_that_may_outlast_ten_minutes_is_streamed(
    apis: dict[str, Api],
) -> None:
    """`messages.create` refuses a single call whose max_tokens may take over 10 minutes;
    a turn nobody watches streams it instead of failing."""
    api = apis["anthropic"]
    request = ModelRequest(None, HISTORY, [], watched=False)
    api.server.play(Turn("Court."), Turn("Long."))

    for max_tokens in (21_333, 21_334):
        [*_, response] = [c async for c in api.model(max_tokens=max_tokens).stream(request)]
        assert isinstance(response, ModelResponse)

    assert [r.body.get("stream") for r in api.server.requests] == [None, True]
