"""A missing API key does not stop runpoint from starting; it fails the run that needs it,
clearly, and the run completes once the key is there."""

from __future__ import annotations

from dataclasses import replace

import pytest

from runpoint.adapters.serving import ready_models
from runpoint.core.types import RunStatus
from runpoint.facade import ContinueRun, CreateRun
from tests.conftest import OpenRunpoint
from tests.providers.conftest import Api, travel_agent
from tests.providers.wire import Turn

pytestmark = pytest.mark.memory  # storage is not the subject here


async def test_a_missing_key_is_an_error_at_use(
    api: Api, monkeypatch: pytest.MonkeyPatch, open_runpoint: OpenRunpoint
) -> None:
    variable = api.model_class.api_key_env
    monkeypatch.delenv(variable)
    runpoint = await open_runpoint([travel_agent(api.spec)])  # starts: the key is not needed yet

    run = await (await runpoint.create_run(CreateRun(agent_id="travel", message="Hello"))).result()

    assert run.status is RunStatus.ERROR
    assert run.error == (
        f"ConfigurationError: model {api.spec} has no API key: "
        f"set {variable} or give the model an api_key"
    )
    assert api.server.requests == []

    monkeypatch.setenv(variable, "sk-late")
    api.server.play(Turn("Hello to you."))
    resumed = await (await runpoint.continue_run(ContinueRun(run_id=run.run_id))).result()

    assert resumed.status is RunStatus.COMPLETED, resumed.error
    assert resumed.content == "Hello to you."
    headers = api.server.requests[0].headers
    assert "sk-late" in headers.get("authorization", "") + headers.get("x-api-key", "")


async def test_a_server_makes_the_clients_it_has_keys_for_at_start(
    apis: dict[str, Api], monkeypatch: pytest.MonkeyPatch, open_runpoint: OpenRunpoint
) -> None:
    """The first run does not pay for its SDK client (`ready_models`, at `runpoint serve`);
    a model without its key is left for its runs to fail."""
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    keyed, keyless = apis["openai"].spec, apis["anthropic"].spec
    rp = await open_runpoint([travel_agent(keyed), replace(travel_agent(keyless), id="keyless")])
    ready_models(rp)
    assert rp.host.model(keyed)._clients  # type: ignore[attr-defined]
    assert not rp.host.model(keyless)._clients  # type: ignore[attr-defined]
