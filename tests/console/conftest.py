"""Fixtures for the console tests: `runpoint serve` on loopback (the `server` fixture of
tests/conftest.py, one per test module) and Debian's chromium driven by Playwright.

Without /usr/bin/chromium the browser tests are skipped, unless RUNPOINT_REQUIRE_BROWSER is
set (as .ci/run does), which makes its absence an error. Playwright's own browser downloads
are never used.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from playwright.sync_api import Browser, Page, ViewportSize, sync_playwright

from tests.http.conftest import SPEC

CHROMIUM = Path("/usr/bin/chromium")
REQUIRE_ENV = "RUNPOINT_REQUIRE_BROWSER"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LAPTOP = ViewportSize(width=1440, height=900)
PHONE = ViewportSize(width=390, height=844)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set, but there is no {CHROMIUM}")
        pytest.skip(f"no {CHROMIUM}: apt-get install chromium to run the console's browser tests")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield browser
        browser.close()


class Console:
    """A page on the console, the requests it made, and numbered screenshots of its steps."""

    def __init__(self, page: Page, base_url: str, shots: Path) -> None:
        self.page, self.base_url, self.shots = page, base_url, shots
        self.requests: list[tuple[str, str]] = []
        self.errors: list[str] = []
        page.on("request", lambda r: self.requests.append((r.method, r.url)))
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def open(self, fragment: str = "") -> None:
        self.page.goto(f"{self.base_url}/ui/{fragment}")

    def screenshot(self, name: str) -> Path:
        path = self.shots / f"{len(list(self.shots.glob('*.png'))) + 1:02d}-{name}.png"
        self.page.screenshot(path=path, full_page=True)
        return path


@pytest.fixture
def console(browser: Browser, server: str, tmp_path: Path) -> Iterator[Console]:
    context = browser.new_context(viewport=LAPTOP)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    console = Console(context.new_page(), server, shots)
    yield console
    context.close()
    assert not console.errors, f"the page raised: {console.errors}"


def api_routes() -> list[tuple[str, re.Pattern[str]]]:
    """(method, path pattern) of every operation of the checked-in document."""
    paths: dict[str, dict[str, object]] = yaml.safe_load(SPEC.read_text())["paths"]
    return [
        (method.upper(), re.compile(re.sub(r"\{\w+\}", "[^/]+", path) + "$"))
        for path, methods in paths.items()
        for method in methods
    ]


def assert_only_api_requests(console: Console) -> None:
    """The console is a client of the public API: every request it made is /ui or an
    operation of the document."""
    routes = api_routes()
    for method, url in console.requests:
        parts = urlsplit(url)
        assert url.startswith(console.base_url), url
        assert parts.path.startswith("/ui") or any(
            method == m and pattern.match(parts.path) for m, pattern in routes
        ), (method, url)
