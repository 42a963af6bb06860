"""Behind a proxy at /rp: one that strips the prefix, one that keeps it (runpoint told by
`root_path`, `--root-path`), or a server told it (uvicorn's --root-path, which puts it in
the scope's `root_path`); each way the app answers, and says the prefix where it shows."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from runpoint.adapters.litestar import create_app
from runpoint.plugins.demo import agents
from tests.serving import serving

from .flows import prefix_shows

pytestmark = pytest.mark.memory


def client(*, root_path: str = "", told: str = "", base: str = "") -> httpx.AsyncClient:
    app = create_app(agents, database="memory:", root_path=told)
    transport = httpx.ASGITransport(app=app, root_path=root_path)
    return httpx.AsyncClient(transport=transport, base_url=f"http://test{base}")


@pytest.mark.parametrize(
    "way",
    [
        pytest.param({"told": "/rp"}, id="a proxy strips it"),
        pytest.param({"told": "/rp", "base": "/rp"}, id="a proxy keeps it"),
        pytest.param({"told": "/rp/", "base": "/rp"}, id="told with a slash"),
        pytest.param({"root_path": "/rp", "base": "/rp"}, id="the server says it"),
    ],
)
async def test_behind_a_proxy(way: dict[str, str]) -> None:
    async with client(**way) as rp:
        created = await rp.post(
            "/agents/travel-agent/runs", data={"message": "Paris", "stream": "false"}
        )
        assert created.status_code == 200, created.text
        await prefix_shows(rp)


def test_runpoint_serve_root_path(tmp_path: Path) -> None:
    with serving(tmp_path / "runpoint.db", "--root-path", "/rp") as server:
        for path in ("/health", "/rp/health"):  # stripped, kept
            assert httpx.get(server + path).status_code == 200
        document = httpx.get(f"{server}/openapi.json").json()
        assert document["servers"] == [{"url": "/rp"}]
