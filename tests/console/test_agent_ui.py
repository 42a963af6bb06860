"""Agno's web UI (agno-agi/agent-ui, unchanged but for its fonts) against `runpoint serve`,
in Chromium, as its user meets it: the endpoint set to runpoint's URL, the agents listed, a
run streamed with its tool calls, the session in the sidebar, reopened after a reload with
its history and continued, then deleted; on SQLite and on PostgreSQL.

The UI is a production build (`next build`, served by `next start`) that
`python -m tests.console.agent_ui` makes once, outside the suite (.ci/run does). Without it
the test is skipped, unless RUNPOINT_REQUIRE_AGENT_UI is set (as .ci/run does), which makes
its absence an error.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Locator, Page, Request, Response, Route, expect

from tests.serving import await_health, free_port, serving

from . import agent_ui
from .conftest import LAPTOP

QUESTION = "What should I know about Kyoto and Paris?"
ANSWER = re.compile(r"Here is what I found\. Paris: .*arrondissements.*; Kyoto: .*imperial capital")


@pytest.fixture(scope="module")
def ui() -> Iterator[str]:
    """`next start` of the built UI on a free loopback port."""
    app = agent_ui.built()
    if not (app / ".next" / "BUILD_ID").exists():
        build = "python -m tests.console.agent_ui"
        if os.environ.get(agent_ui.REQUIRE_ENV):
            pytest.fail(f"{agent_ui.REQUIRE_ENV} is set, but agent-ui is not built: {build}")
        pytest.skip(f"agent-ui is not built in {app.parent}: {build} builds it (git, npm)")
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    next_ = [str(app / "node_modules" / ".bin" / "next"), "start", "-H", "127.0.0.1"]
    environment = {**os.environ, "NEXT_TELEMETRY_DISABLED": "1"}
    process = subprocess.Popen([*next_, "-p", str(port)], cwd=app, env=environment)
    try:
        await_health(process, base_url, seconds=30, exited=lambda: "next start exited", path="/")
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def runpoint(ui: str, database: str) -> Iterator[str]:
    with serving(database, "--cors-origins", ui) as base_url:
        yield base_url


@pytest.fixture
def page(browser: Browser, runpoint: str) -> Iterator[Page]:
    """A page on a fresh browser profile; what runpoint answered it, and any request to runpoint
    that failed, are checked after."""
    context = browser.new_context(viewport=LAPTOP)
    page = context.new_page()
    failed: list[str] = []
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    def answered(response: Response) -> None:
        if response.url.startswith(runpoint) and not response.ok:
            failed.append(f"{response.request.method} {response.url}: {response.status}")

    def refused(request: Request) -> None:  # by the browser (CORS), or broken off
        if request.url.startswith(runpoint):
            failed.append(f"{request.method} {request.url}: {request.failure}")

    page.on("response", answered)
    page.on("requestfailed", refused)
    yield page
    context.close()
    assert not errors, f"the page raised: {errors}"
    assert not failed, f"runpoint refused: {failed}"


def test_agno_agent_ui_runs_reopens_and_deletes_a_session(
    page: Page, ui: str, runpoint: str
) -> None:
    page.goto(ui)
    page.get_by_text("localhost:7777").click()  # its default endpoint, a user edits it
    endpoint = page.locator("input[type=text]")
    endpoint.fill(runpoint)
    endpoint.press("Enter")

    # the agents, listed; the first chosen until the user picks one
    agent = page.get_by_role("combobox").nth(1)
    expect(agent).to_contain_text("Travel Agent")
    agent.click()
    for name in ("Travel Agent", "Checkpoint Agent", "Booking Agent"):
        expect(page.get_by_role("option", name=name)).to_be_visible()
    page.get_by_role("option", name="Checkpoint Agent").click()
    expect(page.get_by_text("No session records yet", exact=False)).to_be_visible()

    # a run, streamed, with its tool calls. The UI fetches a new session's history as soon as
    # the stream names it and shows that answer whenever it comes, over what it streamed
    # since (docs/http.md): the fetch is held until the stream has ended, or a run faster
    # than the fetch would be shown as it was when runpoint read it.
    held: list[Route] = []
    page.route(f"{runpoint}/sessions/*/runs?*", lambda route: held.append(route))
    stream = f"{runpoint}/agents/checkpoint-agent/runs"
    fetched = page.expect_request(lambda r: "/runs?" in r.url)  # the history fetch, held
    with fetched, page.expect_request_finished(lambda r: r.url == stream) as run:
        ask(page, QUESTION)
    response = run.value.response()
    assert response and response.headers["content-type"].startswith("text/event-stream")
    expect(page.get_by_text(ANSWER)).to_be_visible()
    expect(page.get_by_text("get_city_fact")).to_have_count(2)
    with page.expect_response(lambda r: "/runs?" in r.url):
        deadline = time.monotonic() + 5  # its route is handled just after it is seen
        while not held and time.monotonic() < deadline:
            page.wait_for_timeout(20)
        (history,) = held
        history.continue_()
    page.unroute(f"{runpoint}/sessions/*/runs?*")
    expect(page.get_by_text(ANSWER)).to_be_visible()
    expect(page.get_by_text("get_city_fact")).to_have_count(2)
    expect(sidebar(page)).to_have_count(1)
    expect(sidebar(page)).to_contain_text("What should I know")  # named by its first input
    session = re.search(r"session=([\w-]+)", page.url)
    assert session, page.url

    # reopened after a reload, with its history, and continued
    page.reload()
    expect(page.get_by_text(QUESTION)).to_be_visible()
    expect(page.get_by_text("get_city_fact")).to_have_count(2)
    expect(page.get_by_text(ANSWER)).to_be_visible()
    with page.expect_request_finished(lambda r: r.url == stream):
        ask(page, "And Tokyo?")
    expect(page.get_by_text("Here is what I found. Tokyo: No stored fact")).to_be_visible()
    page.reload()
    expect(page.get_by_text("And Tokyo?")).to_be_visible()
    expect(page.get_by_text("get_city_fact")).to_have_count(3)
    expect(sidebar(page)).to_have_count(1)
    expect(sidebar(page)).to_contain_text("What should I know")  # runpoint's session_name
    assert f"session={session[1]}" in page.url

    # deleted
    sidebar(page).hover()
    sidebar(page).get_by_role("button").click()
    page.get_by_role("button", name="DELETE").click()
    expect(page.get_by_text("Session deleted")).to_be_visible()
    expect(page.get_by_text("No session records yet", exact=False)).to_be_visible()
    assert httpx.get(f"{runpoint}/sessions/{session[1]}").status_code == 404
    page.reload()
    expect(page.get_by_text("No session records yet", exact=False)).to_be_visible()


def ask(page: Page, text: str) -> None:
    page.get_by_placeholder("Ask anything").fill(text)
    page.get_by_placeholder("Ask anything").press("Enter")


def sidebar(page: Page) -> Locator:
    """The sessions the sidebar lists (each a row with its delete button)."""
    return page.locator("div.group:has(h4)")
