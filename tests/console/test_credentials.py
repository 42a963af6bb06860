"""The console on a server that asks for credentials (`runpoint serve --api-keys`): it asks for
a token, keeps it for the tab only, sends it on every call, streams included, and shows the
server's words when a token is refused or may not do something."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.http.conftest import bearer, write_keys
from tests.serving import serving

from .conftest import Console
from .test_console import opened_run, unnamed_controls
from .test_states import create_run

TOKEN_FIELD = "API key or JWT"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`runpoint serve` with the keys of tests/http/conftest.py: teams alpha and beta."""
    directory = tmp_path_factory.mktemp("serve-with-keys")
    keys = write_keys(directory / "keys.yaml")
    with serving(directory / "runpoint.db", "--api-keys", str(keys)) as base_url:
        yield base_url


def sign_in(page: Page, token: str) -> None:
    page.get_by_label(TOKEN_FIELD).fill(token)
    page.get_by_role("button", name="Sign in").click()


def stored(page: Page) -> dict[str, str]:
    """What the page keeps: its sessionStorage, localStorage and cookies."""
    found: dict[str, str] = page.evaluate(
        "() => ({session: JSON.stringify(sessionStorage), local: JSON.stringify(localStorage),"
        " cookies: document.cookie})"
    )
    return found


def test_the_console_asks_for_a_token_and_shows_that_teams_sessions(console: Console) -> None:
    page = console.page
    alpha, alpha_run = create_run(console.base_url, bearer("alpha-key"))
    beta, _ = create_run(console.base_url, bearer("beta-key"))
    console.open()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_label(TOKEN_FIELD)).to_be_focused()
    expect(page.get_by_label(TOKEN_FIELD)).to_have_attribute("type", "password")
    expect(page.locator("#workspace")).to_be_hidden()
    assert unnamed_controls(page) == []
    console.screenshot("asks-for-a-token")

    sign_in(page, "not-a-key")
    expect(page.get_by_role("alert")).to_have_text("The server refused the token: unknown API key")
    expect(page.locator("#workspace")).to_be_hidden()
    console.screenshot("wrong-token")

    sign_in(page, "alpha-key")
    sessions = page.locator("#sessions")
    expect(sessions).to_contain_text(alpha)
    expect(sessions).not_to_contain_text(beta)
    expect(page.get_by_label("Agent")).to_have_value("travel-agent")
    kept = {"session": '{"runpoint.token":"alpha-key"}', "local": "{}", "cookies": ""}
    assert stored(page) == kept
    console.screenshot("signed-in")
    console.open(f"#/sessions/{beta}")  # another team's: as if it did not exist
    expect(page.locator("#session-body [role=alert]")).to_contain_text("Unknown session")

    # the streamed continue goes with the token too
    page.get_by_role("link", name=alpha).click()
    page.locator(f'#session-body a[href$="/runs/{alpha_run}"]').click()
    page.get_by_role("button", name="Checkpoint at message 3", exact=True).click()
    page.get_by_label("New input").fill("Only Paris, please.")
    with page.expect_request(lambda r: r.url.endswith("/continue?events=all")) as continued:
        page.get_by_role("button", name="Continue from here").click()
    assert continued.value.header_value("authorization") == "Bearer alpha-key"
    opened_run(page, other_than=alpha_run)
    expect(page.locator("#session-body .tree-children .tree-node")).to_have_count(1)

    # the token is this tab's: another tab asks for one
    other_tab = page.context.new_page()
    other_tab.goto(f"{console.base_url}/ui/")
    expect(other_tab.get_by_role("heading", name="Sign in")).to_be_visible()
    other_tab.close()

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.locator("#sign-in-reason")).to_be_empty()
    assert stored(page)["session"] == "{}"


def test_a_read_only_keys_continue_shows_the_servers_refusal(console: Console) -> None:
    page = console.page
    session_id, run_id = create_run(console.base_url, bearer("alpha-key"))
    console.open(f"#/sessions/{session_id}/runs/{run_id}/at/3")
    sign_in(page, "alpha-reader-key")
    expect(page.locator("#inspector-title")).to_have_text("Snapshot at message 3")  # it reads
    page.get_by_label("New input").fill("Only Paris, please.")
    page.get_by_role("button", name="Continue from here").click()
    alert = page.locator("#inspector [role=alert]")
    expect(alert).to_contain_text("Not started")
    expect(alert).to_contain_text("this token lacks the 'write' scope")
    expect(alert).to_contain_text("FORBIDDEN")
    expect(page.locator("#session-body .tree-node")).to_have_count(1)
    console.screenshot("read-only-continue")
