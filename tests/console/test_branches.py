"""Changing the past and comparing the futures in the console, one server for the module:
edit-and-fork from the transcript (a user message, a tool call's result, a call's
arguments), a paused batch decided (arguments edited, rejected with a reason, answered),
and a run beside its edited fork from their common checkpoint, with the diff marked."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Page, expect

from .conftest import Console
from .test_console import opened_run, start_run, unnamed_controls


def session_of(page: Page) -> str:
    found = re.search(r"#/sessions/([^/]+)/", page.url)
    assert found
    return found[1]


def runs_of(console: Console, session_id: str) -> list[str]:
    listed = httpx.get(f"{console.base_url}/sessions/{session_id}/runs").json()
    return [r["run_id"] for r in listed]


def fork_with(page: Page, button: str, text: str) -> None:
    """Opens an Edit button's form in the transcript, writes `text` and forks."""
    page.get_by_role("button", name=button).click()
    page.locator(".edit-form textarea").fill(text)
    page.get_by_role("button", name="Fork with this edit").click()


def test_edit_a_result_at_a_checkpoint_and_open_the_fork(console: Console) -> None:
    page = console.page
    console.open()
    source = start_run(page)
    page.get_by_role("button", name="Checkpoint at message 3", exact=True).click()
    # before the boundary: the user message, Paris's result, and the call of the batch
    # that ends there; nothing after it
    edits = page.locator(".edit-button")
    expect(edits).to_have_text(["Edit message", "Edit arguments", "Edit result"])
    expect(page.locator('.msg[data-index="2"]')).to_contain_text("Edit result")
    console.screenshot("edit-buttons")
    page.get_by_role("button", name="Edit result (message 2)").click()
    expect(page.get_by_label("New result of get_population")).to_have_value("2.1M")
    console.screenshot("edit-form")
    fork_with(page, "Edit result (message 2)", "99M")

    fork = opened_run(page, other_than=source)
    expect(page.locator(".lineage-line")).to_contain_text(
        f"Forked from run {source[:8]} at message 3"
    )
    transcript = page.get_by_role("list", name="Transcript")
    edited = transcript.locator('.msg[data-index="2"]')
    expect(edited).to_contain_text("99M")
    expect(edited.locator(".tag")).to_contain_text(["edited"])
    expect(transcript).to_contain_text("Paris: 99M; Tokyo: 13.9M.")
    assert not unnamed_controls(page)
    console.screenshot("edited-fork")
    source_run = httpx.get(
        f"{console.base_url}/agents/travel-agent/runs/{source}",
        params={"session_id": session_of(page)},
    ).json()
    assert source_run["messages"][2]["content"] == "2.1M"  # the source is untouched
    assert fork in runs_of(console, session_of(page))


def test_edit_arguments_refused_then_run_again_and_a_user_message(console: Console) -> None:
    page = console.page
    console.open()
    source = start_run(page)
    session_id = session_of(page)
    page.get_by_role("button", name="Checkpoint at message 3", exact=True).click()
    before = runs_of(console, session_id)

    fork_with(page, "Edit arguments of get_population (message 1)", "{nope")
    expect(page.locator(".edit-form .form-errors")).to_contain_text("are not JSON")
    page.locator(".edit-form textarea").fill('{"city": 5}')
    page.get_by_role("button", name="Fork with this edit").click()
    errors = page.locator(".edit-form .form-errors")
    expect(errors).to_contain_text("Not started")
    expect(errors).to_contain_text("arguments.city")  # the server's 422 names the field
    console.screenshot("arguments-refused")
    assert runs_of(console, session_id) == before  # nothing was made

    page.locator(".edit-form textarea").fill('{"city": "Lagos"}')
    page.get_by_role("button", name="Fork with this edit").click()
    opened_run(page, other_than=source)
    transcript = page.get_by_role("list", name="Transcript")
    expect(transcript.locator('.msg[data-index="1"]')).to_contain_text(
        'get_population({"city":"Lagos"})'
    )
    expect(transcript.locator('.msg[data-index="2"]')).to_contain_text("15.3M")
    expect(transcript).to_contain_text("Lagos: 15.3M")

    console.open(f"#/sessions/{session_id}/runs/{source}/at/3")
    fork_with(page, "Edit message (message 0)", "Only Kyoto, please")
    opened_run(page, other_than=source)
    transcript = page.get_by_role("list", name="Transcript")
    expect(transcript.locator('.msg[data-index="0"]')).to_contain_text("Only Kyoto, please")
    expect(transcript).to_contain_text("Paris: 2.1M; Kyoto: 1.5M.")
    console.screenshot("user-message-edited")


def paused(page: Page) -> None:
    expect(page.locator("#run-title")).to_contain_text("PAUSED")
    expect(page.get_by_role("heading", name="Decide the paused calls")).to_be_visible()


def test_a_paused_batch_approved_with_edits_rejected_with_a_reason_and_answered(
    console: Console,
) -> None:
    page = console.page
    console.open()
    page.get_by_label("Agent").select_option("booking-agent")
    page.get_by_label("Message").fill("Book trips to Paris, Kyoto and Lagos")
    page.get_by_role("button", name="Start run").click()
    paused(page)
    expect(page.locator(".decision legend")).to_have_text('book_trip({"city":"Paris"})')
    console.screenshot("paused")

    page.get_by_label("Run it with these arguments").check()
    page.get_by_label("Arguments (JSON)").fill('{"town": "Lyon"}')
    page.get_by_role("button", name="Send the decisions").click()
    expect(page.locator(".decision-form .form-errors")).to_contain_text(
        "arguments.town is not a parameter of the tool"
    )
    console.screenshot("edit-refused")
    page.get_by_label("Arguments (JSON)").fill('{"city": "Lyon"}')
    page.get_by_role("button", name="Send the decisions").click()

    expect(page.locator(".decision legend")).to_have_text('book_trip({"city":"Lagos"})')
    paused(page)
    page.get_by_label("Reject it").check()
    page.get_by_label("Reason").fill("Too far this year")
    page.get_by_role("button", name="Send the decisions").click()

    expect(page.locator(".decision legend")).to_have_text('book_trip({"city":"Kyoto"})')
    page.get_by_label("Answer it myself").check()
    page.get_by_label("Result", exact=True).fill("Booked by phone.")
    console.screenshot("answer")
    page.get_by_role("button", name="Send the decisions").click()

    expect(page.locator("#run-title")).to_contain_text("COMPLETED")
    transcript = page.get_by_role("list", name="Transcript")
    lyon = transcript.locator(".msg.role-tool").nth(0)
    expect(lyon).to_contain_text('book_trip({"city":"Lyon"})')  # what ran
    expect(lyon).to_contain_text("Booked a trip to Lyon.")
    expect(lyon).to_contain_text("run with a person's arguments")
    lagos = transcript.locator(".msg.role-tool").nth(1)
    expect(lagos).to_contain_text("The reason given: Too far this year")
    expect(lagos).to_contain_text("rejected by a person")
    expect(transcript.locator(".msg.role-tool").nth(2)).to_contain_text("answered by a person")
    # the model's proposal stays in its turn
    expect(transcript.locator('.msg[data-index="1"]')).to_contain_text(
        'book_trip({"city":"Paris"})'
    )
    assert not unnamed_controls(page)
    console.screenshot("decided")


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
