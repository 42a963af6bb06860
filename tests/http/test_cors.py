"""CORS: browsers at the origins `--cors-origins` names may call runpoint (preflights
answered before authentication), others get no CORS headers, and with none named nothing
changes."""

from __future__ import annotations

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from runpoint.adapters import auth
from runpoint.adapters.litestar import create_app
from runpoint.adapters.litestar.security import cors
from runpoint.plugins.demo import agents

from .conftest import bearer

UI = "http://localhost:3000"
PREFLIGHT = {
    "Origin": UI,
    "Access-Control-Request-Method": "DELETE",
    "Access-Control-Request-Headers": "authorization, idempotency-key, content-type",
}


def client(access: auth.Auth, origins: str | None) -> AsyncTestClient[Litestar]:
    app = create_app(agents, database="memory:", auth=access, cors_origins=origins)
    return AsyncTestClient(app)


async def test_a_preflight_from_an_allowed_origin_is_answered_without_credentials(
    keyed_auth: auth.Auth,
) -> None:
    async with client(keyed_auth, f"https://other.example, {UI}") as http:
        answer = await http.options("/sessions/s1", headers=PREFLIGHT)
        assert answer.status_code == 204  # not a 401: a preflight carries no credentials
        assert answer.headers["access-control-allow-origin"] == UI
        assert answer.headers["access-control-allow-credentials"] == "true"
        assert "DELETE" in answer.headers["access-control-allow-methods"]
        allowed = answer.headers["access-control-allow-headers"].lower().split(", ")
        for header in ("authorization", "idempotency-key", "last-event-id", "content-type"):
            assert header in allowed

        refused = await http.options(
            "/sessions", headers={**PREFLIGHT, "Access-Control-Request-Headers": "x-secret"}
        )
        assert refused.status_code == 400


async def test_a_preflight_from_another_origin_gets_no_cors_headers(
    keyed_auth: auth.Auth,
) -> None:
    async with client(keyed_auth, UI) as http:
        answer = await http.options(
            "/sessions", headers={**PREFLIGHT, "Origin": "https://evil.example"}
        )
        assert answer.status_code == 400
        assert not [h for h in answer.headers if h.lower().startswith("access-control-")]


async def test_a_request_carries_the_origin_only_for_allowed_origins(
    keyed_auth: auth.Auth,
) -> None:
    async with client(keyed_auth, UI) as http:
        answer = await http.get("/sessions", headers={"Origin": UI, **bearer("alpha-key")})
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == UI
        assert answer.headers["access-control-allow-credentials"] == "true"
        exposed = answer.headers["access-control-expose-headers"].lower().split(", ")
        assert sorted(exposed) == ["location", "retry-after", "x-request-id"]
        # a refusal too, so the browser's script can read why
        refused = await http.get("/sessions", headers={"Origin": UI})
        assert refused.status_code == 401
        assert refused.headers["access-control-allow-origin"] == UI

        evil = {"Origin": "https://evil.example", **bearer("alpha-key")}
        other = await http.get("/sessions", headers=evil)
        assert other.status_code == 200
        assert "access-control-allow-origin" not in other.headers


async def test_any_origin_is_allowed_without_credentials() -> None:
    async with client(auth.Auth(), "*") as http:
        answer = await http.options("/health", headers=PREFLIGHT)
        assert answer.status_code == 204
        assert answer.headers["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in answer.headers
        read = await http.get("/agents", headers={"Origin": "https://anywhere.example"})
        assert read.headers["access-control-allow-origin"] == "*"
        assert "access-control-allow-credentials" not in read.headers


async def test_with_no_origins_nothing_changes(keyed_auth: auth.Auth) -> None:
    async with client(keyed_auth, None) as http:
        answer = await http.options("/health", headers=PREFLIGHT)
        assert answer.status_code == 204
        assert "allow" in answer.headers
        assert not [h for h in answer.headers if h.lower().startswith("access-control-")]
        read = await http.get("/health", headers={"Origin": UI})
        assert not [h for h in read.headers if h.lower().startswith("access-control-")]


@pytest.mark.parametrize(
    "origins", ["http://localhost:3000/", "localhost:3000", "https://a.example/ui"]
)
def test_an_origin_with_a_path_or_without_a_scheme_is_refused(origins: str) -> None:
    with pytest.raises(ValueError, match="SCHEME://HOST"):
        cors(origins)


def test_blank_origins_are_none() -> None:
    assert cors(" , ") is None
