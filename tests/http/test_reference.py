"""The document as a server serves it (with or without its bearer-token requirement), the
API reference at /docs with the files it loads, and `/`."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
import yaml
from litestar.testing import AsyncTestClient

from runpoint.adapters import auth
from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.plugins.demo import agents

from .conftest import SPEC

pytestmark = pytest.mark.memory  # nothing here is stored
Client = AsyncTestClient[RunpointApp]


@pytest.fixture
async def keyed(database: str, keyed_auth: auth.Auth) -> AsyncIterator[Client]:
    async with AsyncTestClient(create_app(agents, database=database, auth=keyed_auth)) as client:
        yield client


async def test_a_server_with_keys_serves_the_checked_in_document(keyed: Client) -> None:
    response = await keyed.get("/openapi.json")  # public
    assert response.status_code == 200
    assert response.json() == yaml.safe_load(SPEC.read_text())


async def test_an_open_server_serves_it_asking_for_no_credentials(client: Client) -> None:
    checked_in = yaml.safe_load(SPEC.read_text())
    served = (await client.get("/openapi.json")).json()
    assert "security" not in served and "securitySchemes" not in served["components"]
    del checked_in["security"], checked_in["components"]["securitySchemes"]
    assert served == checked_in


async def test_the_reference_loads_only_files_the_server_serves(keyed: Client) -> None:
    page = await keyed.get("/docs")  # public, like the console
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert "SwaggerUIBundle" in page.text and '"operationId":"create_agent_run"' in page.text
    loaded = re.findall(r'(?:src|href)=["\']([^"\']+)["\']', page.text)
    assert sorted(loaded) == [
        "/docs/assets/swagger-ui-bundle.js",
        "/docs/assets/swagger-ui-standalone-preset.js",
        "/docs/assets/swagger-ui.css",
    ]
    for path in loaded:
        response = await keyed.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith(("text/javascript", "text/css"))
    for other in ("index.html", "swagger-initializer.js", "..%2F..%2Fpyproject.toml"):
        assert (await keyed.get(f"/docs/assets/{other}")).status_code == 404


async def test_the_root_leads_to_the_console(keyed: Client) -> None:
    response = await keyed.get("/", follow_redirects=False)
    assert response.status_code == 302
    assert response.headers["location"] == "/ui/"
