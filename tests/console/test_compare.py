"""Comparing two runs in the console: a run and a fork of it with an edited tool result,
side by side from their common checkpoint, with the edit and what each added marked."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import expect

from .conftest import Console
from .test_console import start_run, unnamed_controls


def test_a_run_and_its_edited_fork_side_by_side(console: Console) -> None:
    page = console.page
    console.open()
    source = start_run(page)
    session = re.search(r"#/sessions/([^/]+)/", page.url)
    assert session
    session_id = session[1]
    runs = f"{console.base_url}/agents/travel-agent/runs"
    run = httpx.get(f"{runs}/{source}", params={"session_id": session_id}).json()
    paris = run["tools"][0]["tool_call_id"]
    edit = {"kind": "tool_result", "tool_call_id": paris, "content": "99M"}
    body = {"session_id": session_id, "continue_from": 3, "stream": False, "edits": [edit]}
    fork = httpx.post(f"{runs}/{source}/continue", json=body, timeout=30).json()["run_id"]

    console.open(f"#/sessions/{session_id}/runs/{fork}")
    page.reload()  # the session as it is now, with the fork made outside the console
    expect(page.get_by_role("list", name="Transcript")).to_contain_text("edited")
    page.get_by_label("Run", exact=True).select_option(source)
    page.get_by_label("with run").select_option(fork)
    page.get_by_role("button", name="Compare").click()

    page.wait_for_url(re.compile(rf"/compare/{source}/{fork}$"))
    expect(page.locator(".compare-common")).to_contain_text("the same first 2 messages")
    mine = page.get_by_role("list", name=f"Only in run {source[:8]}")
    theirs = page.get_by_role("list", name=f"Only in run {fork[:8]}")
    expect(mine.locator(".diff-edited")).to_contain_text("replaced")
    expect(mine.locator(".diff-edited")).to_contain_text("2.1M")
    expect(theirs.locator(".diff-edited")).to_contain_text("99M")
    expect(mine.locator(".diff-removed")).to_have_count(3)
    expect(theirs.locator(".diff-added")).to_have_count(3)
    expect(page.locator(".compare-tools")).to_contain_text("2.1M → 99M")
    assert not unnamed_controls(page)
    console.screenshot("compare")
