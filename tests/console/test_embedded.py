"""The console in a real browser, served by runpoint mounted at /rp in a FastAPI app (under
uvicorn): its page, files and every call it makes stay under the prefix, and the smoke
flow works there (start a run, open an interior snapshot, continue from it)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, expect

from tests.embedding.hosts import PREFIX
from tests.embedding.served import served_host

from .conftest import LAPTOP, Console, api_routes
from .test_console import opened_run, start_run


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with served_host(tmp_path_factory.mktemp("host") / "runpoint.db") as base_url:
        yield base_url


@pytest.fixture
def console(browser: Browser, host: str, tmp_path: Path) -> Iterator[Console]:
    context = browser.new_context(viewport=LAPTOP)
    (shots := tmp_path / "screenshots").mkdir()
    console = Console(context.new_page(), host + PREFIX, shots)
    yield console
    context.close()
    assert not console.errors, f"the page raised: {console.errors}"


def test_the_console_under_a_prefix(console: Console, host: str) -> None:
    page = console.page
    page.goto(f"{host}{PREFIX}/ui")  # no slash: sent to /rp/ui/, where its files are
    assert page.url == f"{host}{PREFIX}/ui/"
    expect(page.get_by_label("Agent")).to_have_value("travel-agent")
    source = start_run(page)
    expect(
        page.get_by_role("group", name="Checkpoint timeline").get_by_role("button")
    ).to_have_text(["3", "5", "6"])
    page.get_by_role("button", name="Checkpoint at message 3", exact=True).click()
    expect(page.locator("#inspector .snapshot-content")).to_have_text("Looking up Paris.")
    page.get_by_label("New input").fill("Only Paris, please.")
    page.get_by_role("button", name="Continue from here").click()
    opened_run(page, other_than=source)
    expect(page.locator(".lineage-line")).to_have_text(re.compile(f"Forked from run {source[:8]}"))
    console.screenshot("under-a-prefix")

    routes = api_routes()
    for method, url in console.requests:
        path = urlsplit(url).path
        assert path.startswith(PREFIX + "/"), url
        inside = path.removeprefix(PREFIX)
        assert inside.startswith("/ui") or any(
            method == m and pattern.match(inside) for m, pattern in routes
        ), (method, url)
