"""The console's files: served at /ui by the app, shipped in the package, offline (no URL
outside the server), and not part of the API document."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from importlib.resources import files
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from runpoint.adapters.console import DIRECTORY
from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.plugins.demo import agents

SOURCE = Path(__file__).parents[2] / "adapters" / "console" / "static"
MEDIA_TYPES = {".html": "text/html", ".css": "text/css", ".js": "text/javascript"}


@pytest.fixture
async def client() -> AsyncIterator[AsyncTestClient[RunpointApp]]:
    app = create_app(agents, database="memory:")
    async with AsyncTestClient(app) as client:
        yield client


def references(text: str) -> set[str]:
    """The files a page or module loads: src/href attributes and module imports, each
    relative to the page's folder (so that they load under any prefix)."""
    found = re.findall(r'(?:src|href)="([\w-]+\.(?:css|js|html))"', text)
    found += re.findall(r'from "\./([^"]+)"', text)
    return {"/ui/" + name for name in found}


async def test_the_console_and_everything_it_loads_is_served(
    client: AsyncTestClient[RunpointApp],
) -> None:
    pages = [await client.get(path) for path in ("/ui", "/ui/")]
    assert all(p.status_code == 200 and "<title>runpoint console</title>" in p.text for p in pages)
    seen: set[str] = set()
    queue = references(pages[0].text)
    while queue:
        seen.add(path := queue.pop())
        response = await client.get(path)
        assert response.status_code == 200, path
        assert response.headers["content-type"].startswith(MEDIA_TYPES[Path(path).suffix]), path
        queue |= references(response.text) - seen
    assert {Path(p).name for p in seen} == {p.name for p in SOURCE.iterdir()} - {"index.html"}
    assert (await client.get("/ui/no-such-file.js")).status_code == 404


def test_the_package_ships_every_file_and_nothing_loads_from_elsewhere() -> None:
    installed = files("runpoint.adapters.console") / "static"
    assert sorted(p.name for p in installed.iterdir()) == sorted(p.name for p in SOURCE.iterdir())
    assert DIRECTORY.samefile(Path(str(installed)))
    for path in SOURCE.iterdir():
        assert not re.search(r"(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/", path.read_text()), path


async def test_the_console_is_not_an_operation_of_the_document(
    client: AsyncTestClient[RunpointApp],
) -> None:
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert not [p for p in paths if p.startswith("/ui")]
