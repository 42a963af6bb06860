"""Limits: each principal has its own request budget (429 with Retry-After once spent), so
has each client address for failed authentications, and a body over the configured size
is a 413 however it is sent (a chunked body, which only a real server can send, is in
test_serve.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.enums import ScopeType
from litestar.testing import AsyncTestClient
from litestar.types import Receive, Scope, Send

from runpoint.adapters import auth
from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.adapters.litestar.security import rate_limit
from runpoint.plugins.demo import agents

from .conftest import bearer

Client = AsyncTestClient[RunpointApp]
RUNS = "/agents/travel-agent/runs"
MAX_BODY = 2_000


@pytest.fixture
async def limited(keyed_auth: auth.Auth) -> AsyncIterator[Client]:
    app = create_app(
        agents,
        database="memory:",
        auth=keyed_auth,
        rate_limit=rate_limit("3/minute"),
        max_body_bytes=MAX_BODY,
    )
    async with AsyncTestClient(app) as client:
        yield client


async def test_a_principal_that_spends_its_budget_gets_429_with_retry_after(
    limited: Client,
) -> None:
    alpha = bearer("alpha-key")
    assert [(await limited.get("/sessions", headers=alpha)).status_code for _ in range(3)] == [
        200
    ] * 3
    refused = await limited.get("/agents", headers=alpha)
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.json()["error_code"] == "TOO_MANY_REQUESTS"
    # the budget is the principal's, not the address's, and the public routes have none
    assert (await limited.get("/sessions", headers=bearer("beta-key"))).status_code == 200
    assert (await limited.get("/health")).status_code == 200


async def test_an_address_that_fails_authentication_too_often_gets_429_before_any_check(
    limited: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[str | None] = []
    principal = auth.Auth.principal

    def counting(self: auth.Auth, token: str | None) -> Any:
        checked.append(token)
        return principal(self, token)

    monkeypatch.setattr(auth.Auth, "principal", counting)
    guesses = [(await limited.get("/sessions", headers=bearer(f"guess-{i}"))) for i in range(30)]
    assert [r.status_code for r in guesses] == [401] * 3 + [429] * 27
    refused = guesses[-1]
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert refused.json() == {
        "detail": "too many failed authentications from this address",
        "error_code": "TOO_MANY_REQUESTS",
    }
    assert len(checked) == 3  # the other 27 were refused before their keys were looked at
    # until the window ends the address is refused whatever it sends, even a good key
    # (else a guesser would learn which guess was right), in either dialect
    assert (await limited.get("/sessions", headers=bearer("alpha-key"))).status_code == 429
    v2 = await limited.get("/v2/agents/sessions/s1/checkpoints", headers=bearer("alpha-key"))
    assert (v2.status_code, v2.json()["id"]) == (429, "too_many_requests")
    assert (await limited.get("/health")).status_code == 200  # public routes have no budget
    assert len(checked) == 3


async def test_the_failure_budget_is_each_addresss_own(keyed_auth: auth.Auth) -> None:
    app = create_app(
        agents,
        database="memory:",
        auth=keyed_auth,
        rate_limit=rate_limit("3/minute"),
    )

    async def from_address(scope: Scope, receive: Receive, send: Send) -> None:
        """The app, seeing each request come from the address its X-Test-Address names."""
        if scope["type"] == ScopeType.HTTP:
            named = dict(scope["headers"]).get(b"x-test-address", b"192.0.2.1")
            scope["client"] = (named.decode(), 4242)
        await app(scope, receive, send)

    async with AsyncTestClient(from_address) as client:
        guesser = bearer("guess") | {"X-Test-Address": "192.0.2.66"}
        codes = [(await client.get("/sessions", headers=guesser)).status_code for _ in range(4)]
        assert codes == [401, 401, 401, 429]
        assert (await client.get("/sessions", headers=bearer("alpha-key"))).status_code == 200
        assert (await client.get("/sessions", headers=bearer("guess"))).status_code == 401


def test_a_rate_limit_is_count_per_unit() -> None:
    assert rate_limit(" 600/minute ").rate_limit == ("minute", 600)
    for wrong in ("600", "0/second", "10/week", "ten/hour"):
        with pytest.raises(ValueError, match="COUNT/UNIT"):
            rate_limit(wrong)


@pytest.mark.parametrize("how", ["json", "multipart", "form"])
async def test_a_body_over_the_limit_is_a_413_however_it_comes(limited: Client, how: str) -> None:
    headers = bearer("alpha-key")
    big = "x" * MAX_BODY
    if how == "json":
        response = await limited.post(RUNS, json={"message": big}, headers=headers)
    elif how == "multipart":
        response = await limited.post(RUNS, files={"message": ("m.txt", big)}, headers=headers)
    else:
        response = await limited.post(RUNS, data={"message": big}, headers=headers)
    assert response.status_code == 413
    assert response.json()["error_code"] == "REQUEST_ENTITY_TOO_LARGE"
    # nothing was started
    assert (await limited.get("/sessions", headers=headers)).json()["data"] == []


async def test_a_body_under_the_limit_is_served(limited: Client) -> None:
    body = {"message": "x" * (MAX_BODY // 2), "stream": False}
    created = await limited.post(RUNS, json=body, headers=bearer("alpha-key"))
    assert created.status_code == 200
