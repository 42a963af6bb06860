"""The console's schedules page in a real browser: create a schedule, see its next run,
trigger it and see the run among its last runs (a link into the console), disable it."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from .conftest import Console
from .test_console import unnamed_controls


def test_the_schedules_page(console: Console) -> None:
    page = console.page
    console.open("schedules.html")
    expect(page.locator("#schedules")).to_contain_text("No schedules yet")
    page.get_by_label("Name").fill("morning")
    page.get_by_label("Agent").select_option("travel-agent")
    page.get_by_label("Cron expression").fill("0 7 * * *")
    page.get_by_label("Timezone").fill("Europe/Berlin")
    page.get_by_label("Message").fill("Paris and Tokyo")
    page.get_by_role("button", name="Create schedule").click()
    item = page.locator(".schedule", has_text="morning")
    expect(item).to_contain_text("enabled")
    expect(item).to_contain_text("0 7 * * *")
    expect(item.locator("time")).to_have_count(1)  # its next run
    expect(item).to_contain_text("No runs yet")
    assert unnamed_controls(page) == []
    console.screenshot("a-schedule")

    page.get_by_role("button", name="Trigger morning").click()
    link = item.locator(".schedule-runs a")
    expect(link).to_have_count(1)
    expect(link).to_have_attribute("href", re.compile(r"^\./#/sessions/[^/]+/runs/[^/]+$"))
    page.get_by_role("button", name="Disable morning").click()
    expect(item).to_contain_text("disabled")
    expect(item).to_contain_text("next run: none")
    page.get_by_role("button", name="Trigger morning").click()
    expect(item.get_by_role("alert")).to_contain_text("disabled")
    page.get_by_role("button", name="Enable morning").click()
    expect(item).to_contain_text("enabled")
    console.screenshot("disabled-and-enabled")

    bad = "every morning"
    page.get_by_label("Name").fill("broken")
    page.get_by_label("Cron expression").fill(bad)
    page.get_by_label("Message").fill("x")
    page.get_by_role("button", name="Create schedule").click()
    expect(page.locator("#new-schedule-errors")).to_contain_text("cron_expr")
