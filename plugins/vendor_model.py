"""What every model behind an official vendor SDK shares: per-agent settings, an SDK client
made at first use, the choice between a streamed and a single-response vendor call, and
how a request body goes through the SDK.

The client is made lazily because runpoint resolves every agent's model at start-up: a
missing API key must fail the run that needs it, not the server or an import. The SDK is
imported when a model is made, not when its plugin loads: importing one takes seconds, and
a server or command with no agent on that vendor should not pay them.

The client sends through the SDK's own aiohttp backend (`DefaultAioHttpClient`, the SDKs'
`aiohttp` extra) rather than its default httpx one: a turn costs up to a fifth less CPU
(README, "Fewer trips, and the SDKs' aiohttp"); the SDK's retries, timeouts, errors and
streaming are the same, and so are proxies and certificates (httpx still reads them from
the environment). Its connections belong to the event loop they were made in: a model has
a client in each loop it is used in (a process may run servers in several); `aclose`
closes the running loop's when its server closes, and a model nobody closes closes its
clients once it is collected.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import msgspec

from runpoint.core.errors import ConfigurationError, needs_extra
from runpoint.plugins.vendor_messages import MalformedResponse
from runpoint.seams.model import Chunk, ModelRequest, ModelResponse, TextDelta

Client = TypeVar("Client")


@dataclass
class VendorModel(ABC, Generic[Client]):
    """A vendor's model by id; unset settings fall back to the SDK's and the environment's."""

    id: str
    max_tokens: int | None = None
    timeout: float | None = None  # seconds, per request attempt
    max_retries: int | None = None  # the SDK retries rate limits, 5xx and timeouts
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    # stream the vendor call (deltas reach clients as they come) or make one plain call;
    # a turn nobody watches is one plain call either way
    streaming: bool = True
    # let the vendor cache the prompt's prefix across turns, the way each vendor does (see
    # its model): a cached token is billed at a fraction of an input token's price
    prompt_cache: bool = True

    provider: ClassVar[str]  # the prefix of the model string, "openai" in "openai:gpt-5.4"
    sdk: ClassVar[str]  # the SDK's module, and the runpoint extra that installs it
    api_key_env: ClassVar[str]
    history: ClassVar[str]  # the key of the request body's list of the conversation's items

    # a client per event loop (aiohttp's connections belong to the loop that made them),
    # and one made before any loop ran (`ready_models`), which the first loop takes
    _clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Client] = field(
        default_factory=weakref.WeakKeyDictionary, init=False, repr=False, compare=False
    )
    _unbound: Client | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # at start-up, where agents' models are made, rather than in a run's first request
        with needs_extra(self.sdk, f"model {self.name}", self.sdk):
            importlib.import_module(self.sdk)

    @property
    def name(self) -> str:
        return f"{self.provider}:{self.id}"

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        client = self.client()
        try:
            if self.streaming and request.watched:
                async for chunk in self._stream(client, request):
                    yield chunk
            else:
                response = await self._respond(client, request)
                if response.content:
                    yield TextDelta(response.content)
                yield response
        # the SDKs parse events with json; runpoint reads answers and events with msgspec
        except (json.JSONDecodeError, msgspec.DecodeError) as exc:
            raise MalformedResponse(f"{self.name} answered with something not JSON: {exc}") from exc

    def deprecation(self) -> str | None:
        """What the vendor's SDK says of this model if it is deprecated (the server warns of
        it at start-up), or None."""
        return None

    def client(self) -> Client:
        """The SDK client of the running event loop."""
        loop = _running_loop()
        if loop is None:
            self._unbound = self._unbound or self._new_client()
            return self._unbound
        if (client := self._clients.get(loop)) is None:
            client, self._unbound = self._unbound or self._new_client(), None
            self._clients[loop] = client
            # nobody closes a model the host let go (past its MODELS_KEPT): its client is
            # closed once the model is collected, not left for aiohttp to log as unclosed
            weakref.finalize(self, _close_soon, loop, client)
        return client

    async def aclose(self) -> None:
        """Close the running loop's client (its connections); a later turn makes another."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        for made in (client, self._unbound):
            if made is not None:
                await made.close()  # type: ignore[attr-defined]
        self._unbound = None

    def _new_client(self) -> Client:
        api_key = self.api_key or os.environ.get(self.api_key_env)
        if not api_key:
            raise ConfigurationError(
                f"model {self.name} has no API key: set {self.api_key_env} "
                "or give the model an api_key"
            )
        return self._make_client(
            http_client=importlib.import_module(self.sdk).DefaultAioHttpClient(),
            **given(
                api_key=api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
            ),
        )

    @abstractmethod
    def _make_client(self, **options: Any) -> Client: ...

    @abstractmethod
    def _params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments of the SDK call for one turn (see `as_written`)."""

    def _content(self, request: ModelRequest, **more: Any) -> bytes:
        """The body the SDK's typed call sends for `_params(request)`, encoded here.

        The typed call merges `extra_body` into a copy of its arguments and encodes the
        whole with the standard library's json (the anthropic SDK copies the body first,
        `anthropic._utils._prepare.copy_tree`): a turn's cost that grew with the
        transcript. Bytes given as `content` to the client's own `post` go out as they
        are, through the same retries, headers and errors as the typed call's."""
        params = self._params(request)
        body = params.pop("extra_body")  # merged over the typed arguments, as the SDK does
        sent = params | body | more
        if request.memo is not None:
            items = sent[self.history]
            sent[self.history] = encoded(items, self._stable(items), request.memo)
        return msgspec.json.encode(sent)

    def _stable(self, items: list[Any]) -> int:
        """How many of the history's first items (`history`, in the vendor's format) the
        next request of the execution starts with, unchanged."""
        return len(items)

    @abstractmethod
    def _stream(self, client: Client, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Stream one turn: deltas, then the complete ModelResponse."""

    @abstractmethod
    async def _respond(self, client: Client, request: ModelRequest) -> ModelResponse:
        """One turn in a single vendor call."""


def as_written(body: dict[str, Any], **typed: Any) -> dict[str, Any]:
    """The keyword arguments of an SDK call that sends `body` as it is written here.

    The SDKs walk every field of a typed parameter through typing introspection before
    sending it (`openai._utils._transform`, its twin in `anthropic`): about 2 ms for each
    item of the history, 4 ms for one tool, so a turn over 500 items cost a second. runpoint
    writes the vendor's format itself, so the body goes in `extra_body`, which the SDK
    merges into the JSON it sends as it is (retries, timeouts and parsing stay the SDK's).
    `typed` keeps what the SDK reads itself: the model, `stream`, the arguments it requires
    (`body` replaces their values on the wire). The models send these encoded
    (`VendorModel._content`), as the typed call would."""
    return typed | {"extra_body": body}


def encoded(items: list[Any], stable: int, memo: dict[Any, Any]) -> msgspec.Raw:
    """`items` as JSON, the first `stable` encoded once for the execution (`memo`): each
    request resends the history, and encoding all of it again made a turn's cost grow with
    the transcript's length (70 µs at 1,000 messages). The items of the last request that
    start this one are the same objects (`vendor_messages.each_once`): compared by identity
    first, at the speed of C. The bytes are those msgspec makes of the whole list."""
    done, text = memo.get(encoded, ([], b""))
    if items[: len(done)] != done:
        done, text = [], b""
    if stable > len(done):
        more = msgspec.json.encode(items[len(done) : stable])[1:-1]
        text = text + b"," + more if text else more
        done = items[:stable]
        memo[encoded] = (done, text)
    rest = msgspec.json.encode(items[len(done) :])[1:-1]
    return msgspec.Raw(b"[" + b",".join(part for part in (text, rest) if part) + b"]")


_closing: set[asyncio.Task[None]] = set()  # closes under way (a task nobody holds may go)


def _close_soon(loop: asyncio.AbstractEventLoop, client: Any) -> None:
    """Close `client` in `loop`, which made it (a finalizer's call: any thread, any time)."""

    def close() -> None:
        task = loop.create_task(client.close())
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    with contextlib.suppress(RuntimeError):  # the loop closed: nothing left to close in it
        loop.call_soon_threadsafe(close)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # a server makes its clients before its loop runs
        return None


def given(**options: Any) -> dict[str, Any]:
    """The options that are set: an unset one leaves the SDK's (or the vendor's) default."""
    return {k: v for k, v in options.items() if v is not None}
