"""A host app that signs its users in itself hands runpoint each request's principal (the
`principal` hook reads the ASGI scope its middleware filled): runpoint's tenancy rules then
apply unchanged, and runpoint asks for no API key of its own."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from runpoint.adapters import auth
from runpoint.adapters.litestar import create_app
from runpoint.core.tenancy import READ, Principal
from runpoint.plugins.demo import agents

pytestmark = pytest.mark.memory

# the host's own sign-in: a header naming one of its users (a session cookie, in life)
USERS = {
    "ada": Principal("alpha", "ada"),
    "bob": Principal("beta", "bob"),
    "rita": Principal("alpha", "rita", frozenset({READ})),
}


def signed_in(scope: Any) -> Principal | None:
    principal: Principal | None = scope.get("state", {}).get("principal")
    return principal


def host(**options: Any) -> FastAPI:
    app = FastAPI()

    @app.middleware("http")
    async def sign_in(request: Any, call_next: Any) -> Any:
        if (user := request.headers.get("x-host-user")) in USERS:
            request.scope.setdefault("state", {})["principal"] = USERS[user]
        return await call_next(request)

    app.mount("/rp", create_app(agents, database="memory:", principal=signed_in, **options))
    return app


def client(app: FastAPI, user: str | None) -> httpx.AsyncClient:
    headers = {"x-host-user": user} if user else {}
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://test/rp", headers=headers)


async def test_the_hosts_principal_is_who_acts_and_tenancy_applies() -> None:
    app = host()
    async with client(app, "ada") as ada, client(app, "bob") as bob, client(app, "rita") as rita:
        created = await ada.post(
            "/agents/travel-agent/runs", data={"message": "Paris", "stream": "false"}
        )
        assert created.status_code == 200, created.text
        run = created.json()
        read = f"/agents/travel-agent/runs/{run['run_id']}?session_id={run['session_id']}"
        assert (await ada.get(read)).status_code == 200
        assert (await rita.get(read)).status_code == 200  # her team's
        assert (await bob.get(read)).status_code == 404  # another team's: as if not there
        assert [s["session_id"] for s in (await bob.get("/sessions")).json()["data"]] == []
        refused = await rita.post("/agents/travel-agent/runs", data={"message": "Paris"})
        assert refused.status_code == 403  # her principal reads only


async def test_nobody_the_host_knows_is_refused() -> None:
    async with client(host(), None) as anonymous:
        refused = await anonymous.get("/sessions")
        assert refused.status_code == 401
        assert (await anonymous.get("/health")).status_code == 200  # public stays public


async def test_without_the_hosts_user_runpoints_own_keys_still_work(tmp_path: Any) -> None:
    from tests.http.conftest import bearer, write_keys

    keys = auth.load(api_keys_file=str(write_keys(tmp_path / "keys.yaml")))
    async with client(host(auth=keys), None) as keyed:
        assert (await keyed.get("/sessions", headers=bearer("beta-key"))).status_code == 200
        assert (await keyed.get("/sessions")).status_code == 401
