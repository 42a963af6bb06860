"""The console's approvals inbox in a real browser against `runpoint serve`: a paused run's
call is listed, approved or rejected with a note from the inbox, and its run resumes."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from .conftest import Console


def book(page: Page, city: str) -> None:
    page.get_by_role("combobox", name="Agent").select_option("booking-agent")
    page.get_by_role("textbox", name="Message").fill(f"Book a trip to {city}")
    page.get_by_role("button", name="Start run").click()
    expect(page.locator("#run-title")).to_contain_text("PAUSED")


def test_approve_and_reject_from_the_inbox(console: Console) -> None:
    page = console.page
    console.open()
    inbox = page.get_by_role("list", name="Approvals waiting")

    book(page, "Paris")
    item = inbox.get_by_role("listitem").filter(has_text='book_trip({"city":"Paris"})')
    expect(item).to_have_count(1)
    console.screenshot("inbox")
    item.get_by_role("button", name="Approve").click()
    expect(page.locator("#run-title")).to_contain_text("COMPLETED")
    expect(page.get_by_role("list", name="Transcript")).to_contain_text("Booked a trip to Paris.")
    expect(item).to_have_count(0)

    book(page, "Lagos")
    item = inbox.get_by_role("listitem").filter(has_text='book_trip({"city":"Lagos"})')
    item.get_by_label("Note if rejected").fill("Not this year")
    item.get_by_role("button", name="Reject").click()
    expect(page.locator("#run-title")).to_contain_text("COMPLETED")
    expect(page.get_by_role("list", name="Transcript")).to_contain_text("Not this year")
    expect(page.get_by_text("Nothing waits for a decision.")).to_be_visible()
    console.screenshot("inbox-empty")
