"""The console in a real browser against `runpoint serve`: start a run, see its checkpoints,
open an interior snapshot, continue from it and see the fork in the tree; by keyboard
alone too; every control named. And the API reference at /docs beside it. Screenshots go
to each test's tmp_path/screenshots."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from playwright.sync_api import Locator, Page, expect

from .conftest import PHONE, Console, api_routes, assert_only_api_requests

MESSAGE = "Compare the populations of Paris and Tokyo"
CONTROLS = ("button", "link", "textbox", "combobox", "checkbox", "radio")


def start_run(page: Page) -> str:
    """Starts a demo run from the form; the run's id once it has opened."""
    page.get_by_label("Message").fill(MESSAGE)
    page.get_by_role("button", name="Start run").click()
    return opened_run(page)


def opened_run(page: Page, other_than: str = "") -> str:
    """The id of the run the console opens once a stream ends (a run other than `other_than`)."""
    opened = re.compile(r"#/sessions/[^/]+/runs/(?P<run>[^/]+)$")
    page.wait_for_url(lambda url: bool((m := opened.search(url)) and m["run"] != other_than))
    expect(page.locator("#run-title")).to_contain_text("COMPLETED")
    match = opened.search(page.url)
    assert match
    return match["run"]


def test_start_a_run_open_a_snapshot_continue_and_see_the_fork(console: Console) -> None:
    page = console.page
    console.open()
    expect(page.get_by_label("Agent")).to_have_value("travel-agent")
    console.screenshot("console")

    source = start_run(page)
    marks = page.get_by_role("group", name="Checkpoint timeline").get_by_role("button")
    expect(marks).to_have_text(["3", "5", "6"])  # one per tool batch, then the end
    expect(page.get_by_role("list", name="Transcript")).to_contain_text("get_population")
    tree = page.locator("#session-body .tree-node")
    expect(tree).to_have_count(1)
    expect(tree.first).to_contain_text("COMPLETED")
    console.screenshot("run-with-checkpoints")

    page.get_by_role("button", name="Checkpoint at message 3", exact=True).click()
    inspector = page.locator("#inspector")
    expect(page.locator("#inspector-title")).to_have_text("Snapshot at message 3")
    expect(inspector).to_contain_text("RUNNING")  # the run as it was then, not as it ended
    expect(inspector.locator(".snapshot-content")).to_have_text("Looking up Paris.")
    assert page.url.endswith(f"/runs/{source}/at/3")
    console.screenshot("interior-snapshot")

    page.get_by_label("New input").fill("Only Paris, please.")
    page.get_by_role("button", name="Continue from here").click()
    opened_run(page, other_than=source)
    expect(page.locator(".lineage-line")).to_have_text(
        re.compile(rf"Forked from run {source[:8]} at message 3")
    )
    child = page.locator("#session-body .tree-children .tree-node")
    expect(child).to_have_count(1)
    expect(child).to_contain_text(f"forked from {source[:8]} at message 3")
    expect(child).to_have_attribute("aria-current", "page")
    expect(page.locator(".fork-mark")).to_contain_text(f"Forked here from run {source[:8]}")
    expect(page.get_by_role("list", name="Transcript")).to_contain_text("Paris: 2.1M.")
    console.screenshot("fork-in-the-tree")

    page.set_viewport_size(PHONE)
    console.screenshot("fork-on-a-phone")

    assert_only_api_requests(console)


def unnamed_controls(page: Page) -> list[str]:
    """Controls that the browser's accessibility tree gives no name."""
    tree = page.locator("body").aria_snapshot()
    pattern = re.compile(rf"^\s*- ({'|'.join(CONTROLS)})(?P<name> \"[^\"]+\")?")
    return [line for line in tree.splitlines() if (m := pattern.match(line)) and not m["name"]]


def tab_to(page: Page, target: Locator, limit: int = 80) -> None:
    """Presses Tab until `target` has the focus: it is reachable by keyboard."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if target.evaluate("el => el === document.activeElement"):
            return
    raise AssertionError(f"{target} is not reachable with Tab")


def test_the_flow_by_keyboard_alone_with_every_control_named(console: Console) -> None:
    page = console.page
    console.open()
    expect(page.get_by_label("Agent")).to_have_value("travel-agent")
    assert unnamed_controls(page) == []

    tab_to(page, page.get_by_label("Message"))
    page.keyboard.type(MESSAGE)
    tab_to(page, page.get_by_role("button", name="Start run"))
    page.keyboard.press("Enter")
    source = opened_run(page)
    expect(page.locator("#run-title")).to_be_focused()

    tab_to(page, page.get_by_role("button", name="Checkpoint at message 5", exact=True))
    page.keyboard.press("Enter")
    expect(page.locator("#inspector-title")).to_have_text("Snapshot at message 5")
    expect(page.locator("#inspector-title")).to_be_focused()
    assert unnamed_controls(page) == []

    tab_to(page, page.get_by_label("New input"))
    page.keyboard.type("And Lagos?")
    tab_to(page, page.get_by_role("button", name="Continue from here"))
    page.keyboard.press("Enter")
    opened_run(page, other_than=source)
    child = page.locator("#session-body .tree-children .tree-node")
    expect(child).to_contain_text(f"forked from {source[:8]} at message 5")
    assert unnamed_controls(page) == []
    console.screenshot("keyboard-fork")

    # back to the source run through the tree, by keyboard
    tab_to(page, page.locator(f'#session-body a[href$="/runs/{source}"]'))
    page.keyboard.press("Enter")
    expect(page.locator("#run-title")).to_contain_text(source[:8])


def test_the_api_reference_renders_every_operation_offline(console: Console) -> None:
    """/docs: Swagger UI renders every operation of the document, asking no other host."""
    console.page.goto(f"{console.base_url}/docs")
    expect(console.page.locator(".opblock")).to_have_count(len(api_routes()))
    expect(console.page.locator(".info .title")).to_contain_text("runpoint")
    console.screenshot("reference")
    assert {urlsplit(url).netloc for _, url in console.requests} == {
        urlsplit(console.base_url).netloc
    }
