"""A team run in the console, in a real browser against `runpoint serve` (the demo's
`travel-team`: a leader that gives the traveller's question to `travel-agent` and
`planner-agent` at once): the leader's transcript with each member's run under the
delegation call that started it, checkpoints in both, a member's snapshot, and continue
from a checkpoint inside a member's run, which makes a new team run. And a team run that a
member's call pauses, decided in the console (`booking-team`, served beside the demo's)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from tests.serving import serving

from .conftest import Console, assert_only_api_requests
from .test_branches import session_of
from .test_console import opened_run, tab_to, unnamed_controls

QUESTION = "Paris and Kyoto"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`runpoint serve` with the demo's agents and teams, and `booking-team`."""
    app = ("--app", "tests.console.booking_team:agents")
    with serving(tmp_path_factory.mktemp("serve") / "runpoint.db", *app) as base_url:
        yield base_url


def start_team_run(page: Page, team: str = "travel-team", message: str = QUESTION) -> str:
    """Starts a run of `team` from the form; the run's id once it has opened."""
    page.get_by_label("Agent").select_option(team)
    page.get_by_label("Message").fill(message)
    page.get_by_role("button", name="Start run").click()
    return opened_run(page)


def member_section(page: Page, agent_id: str) -> tuple[str, Locator]:
    """The section of `agent_id`'s run in the team run's transcript, and the run's id."""
    section = page.get_by_role("region", name=re.compile(f"^Member {agent_id},"))
    run_id = section.get_attribute("data-member-run-id")
    assert run_id
    return run_id, section


def test_a_team_run_is_a_tree_and_continues_from_a_members_checkpoint(
    console: Console,
) -> None:
    page = console.page
    console.open()
    expect(page.get_by_label("Agent").locator("optgroup[label=Teams] option")).to_have_text(
        ["Travel Team (travel-team)", "Booking Team (booking-team)"]
    )
    source = start_team_run(page)
    session_id = session_of(page)
    expect(page.locator(".facts")).to_contain_text("Team")
    expect(page.locator(".facts")).to_contain_text("travel-team")
    # the leader's checkpoints: after the delegations, and its end
    marks = page.get_by_role("group", name="Checkpoint timeline").get_by_role("button")
    expect(marks).to_have_text(["4", "5"])
    leader = page.get_by_role("list", name="Transcript", exact=True)
    expect(leader).to_contain_text("The team says: travel-agent: Here is what I found.")

    # each member's run under the delegation call (message 1) that started it
    delegation = leader.locator(':scope > .msg[data-index="1"]')
    expect(delegation.locator(".member-run")).to_have_count(2)
    travel_run, travel = member_section(page, "travel-agent")
    planner_run, planner = member_section(page, "planner-agent")
    expect(travel).to_contain_text("COMPLETED")
    expect(page.get_by_role("list", name="Transcript of travel-agent")).to_contain_text(
        'get_population({"city":"Paris"})'
    )
    expect(page.get_by_role("list", name="Transcript of planner-agent")).to_contain_text(
        "Paris is in the plan."
    )
    for member in ("travel-agent", "planner-agent"):
        for k in (3, 5, 6):
            name = f"Checkpoint at message {k} of {member}"
            expect(page.get_by_role("button", name=re.compile(f"^{name} "))).to_be_visible()
    assert planner_run != travel_run
    assert unnamed_controls(page) == []
    console.screenshot("team-run-tree")

    # a member's checkpoint: its run as it was there, and the way to continue from it
    page.get_by_role("button", name=re.compile("^Checkpoint at message 3 of travel-agent ")).click()
    expect(page.locator("#inspector-title")).to_have_text(
        "Snapshot of travel-agent's run at message 3"
    )
    assert page.url.endswith(f"/runs/{source}/members/{travel_run}/at/3")
    inspector = page.locator("#inspector")
    expect(inspector).to_contain_text("RUNNING")
    expect(inspector.locator(".snapshot-content")).to_have_text("Looking up Paris.")
    expect(
        inspector.get_by_role("heading", name="Continue travel-agent's run from message 3")
    ).to_be_visible()
    # the member's later messages are dimmed, the leader's boundary is not selected
    expect(travel.locator('.msg[data-index="3"]')).to_have_class(re.compile(r"\bafter\b"))
    expect(page.locator(".boundary-button[aria-pressed=true]")).to_have_count(1)
    console.screenshot("member-snapshot")

    tab_to(page, page.get_by_label("New input"))
    page.keyboard.type("Only Paris, please.")
    page.get_by_role("button", name="Continue from here").click()
    fork = opened_run(page, other_than=source)

    # a new team run, forked from the source; its travel-agent run forked at message 3
    expect(page.locator(".lineage-line")).to_contain_text(f"Forked from run {source[:8]}")
    child = page.locator("#session-body .tree-children .tree-node")
    expect(child).to_have_count(1)
    expect(child).to_have_attribute("aria-current", "page")
    _, travel = member_section(page, "travel-agent")
    expect(travel).to_contain_text(f"forked from {travel_run[:8]} at message 3")
    expect(travel.locator(".fork-mark")).to_contain_text(f"Forked here from run {travel_run[:8]}")
    expect(travel).to_contain_text("Only Paris, please.")
    # the planner's run is kept as it was, the source's; the leader goes on with the new answer
    planner_now, planner = member_section(page, "planner-agent")
    assert planner_now == planner_run
    expect(planner).to_contain_text(f"inherited from run {source[:8]}")
    expect(page.get_by_role("list", name="Transcript of planner-agent")).to_contain_text(
        "Kyoto is in the plan."
    )
    leader = page.get_by_role("list", name="Transcript", exact=True)
    expect(leader.locator(".msg").last).to_contain_text(
        "travel-agent: Here is what I found. Paris: 2.1M."
    )
    assert unnamed_controls(page) == []
    console.screenshot("continued-from-a-member")

    team = httpx.get(
        f"{console.base_url}/teams/travel-team/runs/{source}", params={"session_id": session_id}
    ).json()
    assert team["status"] == "COMPLETED"  # the source team run is untouched
    assert fork != source
    assert_only_api_requests(console)


def team_run(console: Console) -> dict[str, Any]:
    """A finished run of `travel-team`, made through the API."""
    body = {"message": QUESTION, "stream": False}
    run: dict[str, Any] = httpx.post(f"{console.base_url}/teams/travel-team/runs", json=body).json()
    return run


def continued_from_travel(
    console: Console,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A team run, its travel-agent's run, and the team run continued (through the API)
    from that member's checkpoint 3 with "Only Paris, please."."""
    run = team_run(console)
    travel = next(m for m in run["member_responses"] if m["agent_id"] == "travel-agent")
    body = {
        "session_id": run["session_id"],
        "member_run_id": travel["run_id"],
        "continue_from": 3,
        "input": "Only Paris, please.",
        "stream": False,
    }
    runs = f"{console.base_url}/teams/travel-team/runs"
    continued = httpx.post(f"{runs}/{run['run_id']}/continue", json=body, timeout=30).json()
    return run, travel, continued


def open_at_member(console: Console, run: dict[str, Any], agent_id: str, at: int) -> None:
    """Opens the team run `run` in the console at boundary `at` of `agent_id`'s run."""
    member = next(m for m in run["member_responses"] if m["agent_id"] == agent_id)
    runs = f"#/sessions/{run['session_id']}/runs/{run['run_id']}"
    console.open(f"{runs}/members/{member['run_id']}/at/{at}")


def test_a_members_checkpoint_by_its_address_and_one_of_another_run(console: Console) -> None:
    page = console.page
    run = team_run(console)
    session_id, run_id = run["session_id"], run["run_id"]
    open_at_member(console, run, "planner-agent", 5)
    expect(page.locator("#inspector-title")).to_have_text(
        "Snapshot of planner-agent's run at message 5"
    )
    button = page.get_by_role(
        "button", name=re.compile("^Checkpoint at message 5 of planner-agent ")
    )
    expect(button).to_have_attribute("aria-pressed", "true")

    # a member run of another team run is not this one's: the server's 404 says so
    stranger = team_run(console)["member_responses"][0]["run_id"]
    console.open(f"#/sessions/{session_id}/runs/{run_id}/members/{stranger}/at/3")
    alert = page.locator("#inspector [role=alert]")
    expect(alert).to_contain_text("Not found")
    expect(alert).to_contain_text("NOT_FOUND")
    console.screenshot("member-of-another-run")


def expect_booked(page: Page, city: str) -> None:
    """The booking team's run, resumed, completed with its member's booking of `city`."""
    expect(page.locator("#run-title")).to_contain_text("COMPLETED")
    _, booking = member_section(page, "booking-agent")
    expect(booking).to_contain_text("COMPLETED")
    expect(page.get_by_role("list", name="Transcript", exact=True)).to_contain_text(
        f"booking-agent: Here is what I found. {city}: Booked a trip to {city}."
    )


def test_a_team_run_a_members_call_paused_is_decided_and_resumes_both(console: Console) -> None:
    page = console.page
    console.open()
    page.get_by_label("Agent").select_option("booking-team")
    page.get_by_label("Message").fill("Book trips to Paris")
    page.get_by_role("button", name="Start run").click()
    expect(page.locator("#run-title")).to_contain_text("PAUSED")
    # the call the member's run waits on is the team run's to decide
    expect(page.locator(".decision legend")).to_have_text('book_trip({"city":"Paris"})')
    _, booking = member_section(page, "booking-agent")
    expect(booking).to_contain_text("PAUSED")
    console.screenshot("team-paused-by-a-member")

    page.get_by_role("button", name="Send the decisions").click()
    expect_booked(page, "Paris")


def test_a_members_result_edited_at_its_checkpoint_forks_the_team_run(console: Console) -> None:
    page = console.page
    run = team_run(console)
    source = run["run_id"]
    open_at_member(console, run, "travel-agent", 3)
    _, travel = member_section(page, "travel-agent")
    expect(travel.locator(".edit-button")).to_have_text(
        ["Edit message", "Edit arguments", "Edit result"]
    )
    page.get_by_role("button", name="Edit result (message 2)").click()
    page.locator(".edit-form textarea").fill("99M")
    page.get_by_role("button", name="Fork with this edit").click()

    opened_run(page, other_than=source)
    _, travel = member_section(page, "travel-agent")
    edited = travel.locator('.msg[data-index="2"]')
    expect(edited).to_contain_text("99M")
    expect(edited.locator(".tag")).to_contain_text(["edited"])
    leader = page.get_by_role("list", name="Transcript", exact=True)
    expect(leader.locator(".msg").last).to_contain_text(
        "travel-agent: Here is what I found. Paris: 99M; Kyoto: 1.5M."
    )
    console.screenshot("member-result-edited")


def test_two_team_runs_compared_and_a_team_session_forked(console: Console) -> None:
    page = console.page
    run, _, continued = continued_from_travel(console)
    session_id, source, fork = run["session_id"], run["run_id"], continued["run_id"]

    console.open(f"#/sessions/{session_id}")
    page.get_by_role("button", name="Compare").click()
    page.wait_for_url(re.compile(rf"/compare/{source}/{fork}$"))
    expect(page.get_by_role("list", name=f"Only in run {fork[:8]}")).to_contain_text(
        "travel-agent: Here is what I found. Paris: 2.1M."
    )
    console.screenshot("team-runs-compared")

    page.get_by_role("button", name="Fork session").click()
    expect(page.locator("#session-body")).to_contain_text(f"fork of {session_id}")
    expect(page.locator("#session-body")).to_contain_text("Team travel-team")
    copied = page.locator("#session-body .tree-node")
    expect(copied).to_have_count(2)
    copied.first.click()
    expect(page.locator(".lineage-line")).to_contain_text(
        f"Copied by a session fork from run {source[:8]}"
    )
    # the copy's delegations still hold their members' runs, checkpoints and all
    _, planner = member_section(page, "planner-agent")
    expect(planner).to_contain_text("COMPLETED")
    expect(
        page.get_by_role("button", name=re.compile("^Checkpoint at message 5 of planner-agent "))
    ).to_be_visible()
    console.screenshot("team-session-forked")


def test_an_inbox_approval_of_a_members_call_opens_the_team_run_at_that_member(
    console: Console,
) -> None:
    page = console.page
    body = {"message": "Book trips to Lagos", "stream": False}
    run = httpx.post(f"{console.base_url}/teams/booking-team/runs", json=body, timeout=30).json()
    assert run["status"] == "PAUSED"
    (member,) = run["member_responses"]
    console.open()
    inbox = page.get_by_role("list", name="Approvals waiting")
    item = inbox.get_by_role("listitem").filter(has_text='book_trip({"city":"Lagos"})')
    # the member run is not one of the session's: its link is its team run's, at the member
    item.get_by_role("link", name=f"Run {member['run_id'][:8]}").click()
    page.wait_for_url(re.compile(f"/runs/{run['run_id']}/members/{member['run_id']}$"))
    expect(page.locator("#run-title")).to_contain_text(f"Run {run['run_id'][:8]}")
    expect(page.locator("#run-title")).to_contain_text("PAUSED")
    _, booking = member_section(page, "booking-agent")
    expect(booking).to_contain_text("PAUSED")
    expect(booking).to_have_attribute("aria-current", "true")
    expect(booking).to_be_focused()
    expect(page.locator(".decision legend")).to_have_text('book_trip({"city":"Lagos"})')
    console.screenshot("member-approval-opened")

    # approved from the inbox: the team run resumes with its member, and opens at the member
    item.get_by_role("button", name="Approve").click()
    expect_booked(page, "Lagos")
    expect(item).to_have_count(0)


def test_a_member_run_is_compared_with_the_run_it_was_forked_from(console: Console) -> None:
    page = console.page
    run, travel, fork = continued_from_travel(console)
    session_id, source = run["session_id"], run["run_id"]
    forked = next(m for m in fork["member_responses"] if m["agent_id"] == "travel-agent")
    assert forked["forked_from_run_id"] == travel["run_id"]

    console.open(f"#/sessions/{session_id}/runs/{fork['run_id']}")
    _, section = member_section(page, "travel-agent")
    picker = section.get_by_label("Compare this run with")
    expect(picker.locator("option")).to_have_text(
        [f"{travel['run_id'][:8]} · the run it was forked from"]
    )
    assert unnamed_controls(page) == []
    section.get_by_role("button", name="Compare").click()
    page.wait_for_url(re.compile(f"/compare/{fork['run_id']}%2F{forked['run_id']}/"))
    expect(page.locator("#run-title")).to_have_text(
        f"Compare member runs {forked['run_id'][:8]} with {travel['run_id'][:8]}"
    )
    expect(page.get_by_role("list", name=f"Only in run {forked['run_id'][:8]}")).to_contain_text(
        "Only Paris, please."
    )
    expect(page.get_by_role("list", name=f"Only in run {travel['run_id'][:8]}")).to_contain_text(
        "Kyoto"
    )
    console.screenshot("member-runs-compared")

    # a side's head opens its member run in its team run's tree
    page.get_by_role("link", name=f"Run {travel['run_id'][:8]}").click()
    page.wait_for_url(re.compile(f"/runs/{source}/members/{travel['run_id']}$"))
    expect(page.locator("#run-title")).to_contain_text(f"Run {source[:8]}")
    _, section = member_section(page, "travel-agent")
    expect(section).to_have_attribute("aria-current", "true")
