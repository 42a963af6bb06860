"""The console's empty, error and lineage states in a real browser. This module has its own
server (the fixture is per module), so its first test sees an empty database."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Route, expect

from .conftest import Console
from .test_console import MESSAGE, opened_run


def create_run(base_url: str, headers: dict[str, str] | None = None) -> tuple[str, str]:
    """A finished demo run made through the API (with `headers`), as (session_id, run_id)."""
    body = {"message": MESSAGE, "stream": False}
    run = httpx.post(f"{base_url}/agents/travel-agent/runs", json=body, headers=headers).json()
    return run["session_id"], run["run_id"]


def test_an_empty_console_says_what_to_do(console: Console) -> None:
    console.open()
    expect(console.page.locator("#sessions")).to_contain_text("No sessions yet")
    # an open server asks for no credentials
    expect(console.page.locator("#sign-in")).to_be_hidden()
    expect(console.page.get_by_role("button", name="Sign out")).to_be_hidden()
    expect(console.page.locator("#session-body")).to_contain_text("Pick a session, or start a run")
    console.screenshot("empty")


def test_unknown_session_and_unknown_run(console: Console) -> None:
    page = console.page
    console.open("#/sessions/no-such-session/runs/no-such-run")
    alert = page.locator("#session-body [role=alert]")
    expect(alert).to_contain_text("Unknown session")
    expect(alert).to_contain_text("NOT_FOUND")
    expect(page.locator("#run-body [role=alert]")).to_contain_text("Unknown run")

    session_id, _ = create_run(console.base_url)
    console.open(f"#/sessions/{session_id}/runs/no-such-run")
    alert = page.locator("#run-body [role=alert]")
    expect(alert).to_contain_text("Unknown run")
    expect(alert).to_contain_text("no-such-run")  # the server's own words
    expect(alert.get_by_role("button", name="Try again")).to_be_visible()
    expect(page.locator("#session-body .tree-node")).to_have_count(1)
    console.screenshot("unknown-run")


def test_a_refused_continue_says_why_and_changes_nothing(console: Console) -> None:
    page = console.page
    session_id, run_id = create_run(console.base_url)
    console.open(f"#/sessions/{session_id}/runs/{run_id}/at/3")
    page.get_by_label("New input").fill("Only Paris, please.")
    page.get_by_label("Model").fill("nope:model")
    page.get_by_role("button", name="Continue from here").click()
    alert = page.locator("#inspector [role=alert]")
    expect(alert).to_contain_text("Not started")
    expect(alert).to_contain_text("no model provider 'nope'")
    expect(page.locator("#session-body .tree-node")).to_have_count(1)
    console.screenshot("refused-continue")


def test_a_lost_stream_is_reported_and_the_run_can_still_be_opened(console: Console) -> None:
    """The connection drops after the first events (the browser gets a cut-off stream),
    and the server cannot be reached to join the stream again (test_reconnect.py: it can)."""
    page = console.page
    session_id, run_id = create_run(console.base_url)
    joins: list[str] = []

    def cut_off(route: Route) -> None:
        response = route.fetch()
        first_events = b"".join(e + b"\n\n" for e in response.body().split(b"\n\n")[:3])
        route.fulfill(response=response, body=first_events)

    def unreachable(route: Route) -> None:
        joins.append(route.request.url)
        route.abort()

    page.route(re.compile(r"/continue\?events=all$"), cut_off)
    page.route(re.compile(r"/events\?"), unreachable)
    console.open(f"#/sessions/{session_id}/runs/{run_id}/at/3")
    page.get_by_label("New input").fill("Only Paris, please.")
    page.get_by_role("button", name="Continue from here").click()
    alert = page.locator("#run-body [role=alert]")
    expect(alert).to_contain_text("The stream was lost", timeout=20_000)  # after 5 tries
    assert len(joins) == 5
    expect(page.locator(".live-status")).to_have_text("The stream was lost.")
    expect(page.locator("#session-body .tree-children .tree-node")).to_have_count(1)
    console.screenshot("lost-stream")

    alert.get_by_role("link", name="Open the run").click()
    assert opened_run(page, other_than=run_id)  # it finished on the server all the same


def test_a_session_fork_shows_its_source(console: Console) -> None:
    page = console.page
    session_id, run_id = create_run(console.base_url)
    console.open(f"#/sessions/{session_id}")
    page.get_by_role("button", name="Fork session").click()
    expect(page.locator("#session-title")).not_to_have_text(f"Session {session_id}")
    expect(page.locator("#session-body")).to_contain_text(f"fork of {session_id}")
    node = page.locator("#session-body .tree-node")
    expect(node).to_have_count(1)
    expect(node).to_contain_text(f"copied from session {session_id} (run {run_id[:8]})")
    fork_link = page.locator(".session-forks .session-link")  # nested under its source
    expect(fork_link).to_have_attribute("aria-current", "page")
    node.click()
    expect(page.locator(".lineage-line")).to_contain_text(
        f"Copied by a session fork from run {run_id[:8]} of session {session_id}"
    )
    console.screenshot("session-fork")
