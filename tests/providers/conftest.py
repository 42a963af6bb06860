"""Loopback vendor servers, and the three APIs described for parametrized tests.

The environment points the SDKs' defaults (keys, base URLs) at the loopback servers, so
no test can reach a real vendor, and the string form of a model ("openai:gpt-5.4") works.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest

from runpoint.plugins.anthropic import Claude
from runpoint.plugins.openai import OpenAIChat, OpenAIResponses
from runpoint.plugins.vendor_model import VendorModel
from runpoint.seams.agent import Agent
from tests.providers import wire
from tests.providers.caching import ClaudeCache, OpenAICache
from tests.providers.loopback import Loopback, Reply, Request

MODEL_IDS = {"openai": "gpt-5.4", "openai-chat": "gpt-4o", "anthropic": "claude-sonnet-4-6"}


@pytest.fixture
def openai_server() -> Iterator[Loopback]:
    with Loopback(partial(wire.openai, cache=OpenAICache())) as server:
        yield server


@pytest.fixture
def anthropic_server() -> Iterator[Loopback]:
    with Loopback(partial(wire.anthropic, cache=ClaudeCache())) as server:
        yield server


@pytest.fixture(autouse=True)
def vendor_env(
    monkeypatch: pytest.MonkeyPatch, openai_server: Loopback, anthropic_server: Loopback
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-openai")
    monkeypatch.setenv("OPENAI_BASE_URL", f"{openai_server.url}/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-env-anthropic")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", anthropic_server.url)


@dataclass
class Api:
    """One vendor API: its provider prefix, its model class and the server behind it."""

    provider: str
    model_class: type[VendorModel[Any]]
    server: Loopback
    base_url: str
    made: list[VendorModel[Any]] = field(default_factory=list)  # closed after the test

    @property
    def spec(self) -> str:
        return f"{self.provider}:{MODEL_IDS[self.provider]}"

    def reply(self, turn: wire.Turn, *, stream: bool) -> Reply:
        """The reply the server would make to this API's request for `turn`."""
        path = {"openai": "/v1/responses", "openai-chat": "/v1/chat/completions"}
        request = Request(path.get(self.provider, "/v1/messages"), {}, {"stream": stream})
        return self.server.render(turn, request)

    def model(self, **settings: Any) -> VendorModel[Any]:
        """The model with per-agent settings (its own key and base URL, few retries)."""
        options: dict[str, Any] = {"api_key": "sk-agent", "base_url": self.base_url}
        self.made.append(self.model_class(id=MODEL_IDS[self.provider], **options | settings))
        return self.made[-1]


@pytest.fixture
async def apis(
    openai_server: Loopback, anthropic_server: Loopback
) -> AsyncIterator[dict[str, Api]]:
    v1 = f"{openai_server.url}/v1"
    apis = {
        "openai": Api("openai", OpenAIResponses, openai_server, v1),
        "openai-chat": Api("openai-chat", OpenAIChat, openai_server, v1),
        "anthropic": Api("anthropic", Claude, anthropic_server, anthropic_server.url),
    }
    yield apis
    for api in apis.values():  # a model used without a server: its connections
        for model in api.made:
            await model.aclose()


@pytest.fixture(params=["openai", "openai-chat", "anthropic"])
def api(request: pytest.FixtureRequest, apis: dict[str, Api]) -> Api:
    return apis[request.param]


POPULATIONS = {"Paris": "2.1M", "Tokyo": "13.9M", "Lagos": "15.3M"}


def get_population(city: str) -> str:
    """Look up the population of a city.

    Args:
        city: The city's name.
    """
    if city not in POPULATIONS:
        raise LookupError(f"no population known for {city}")
    return POPULATIONS[city]


def travel_agent(model: str | VendorModel[Any]) -> Agent:
    return Agent(
        id="travel",
        model=model,
        instructions="Use get_population for each city.",
        tools=[get_population],
    )
