"""A member's call to confirm pauses its run and the team run; deciding it, through the
team run's continue or the approvals inbox, resumes both (a member run goes on only
through its leader, whose stream carries it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from litestar.testing import AsyncTestClient

from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.plugins import demo
from runpoint.plugins.scripted import ScriptedModel, demo_turn
from runpoint.seams.agent import Agent
from runpoint.seams.crew import Crew
from tests.http.sse import parse

Client = AsyncTestClient[RunpointApp]
TEAM = "/teams/booking-team/runs"
BOOKED = "The team says: booking-agent: Here is what I found. Paris: Booked a trip to Paris.."


SLOW = 0.5  # seconds each turn of `slow-agent` takes


@pytest.fixture
async def client(database: str) -> AsyncIterator[Client]:
    agents = [
        *demo.agents,
        Crew(id="booking-team", model="scripted:lead", members=["booking-agent"]),
        Agent(
            id="slow-agent",
            model=ScriptedModel(demo_turn, name="scripted:slow", latency=SLOW),
            tools=[demo.get_population],
        ),
        # one member pauses at once, the other takes a while
        Crew(id="mixed-team", model="scripted:lead", members=["booking-agent", "slow-agent"]),
    ]
    async with AsyncTestClient(create_app(agents, database=database)) as client:
        yield client


async def paused(client: Client) -> dict[str, Any]:
    """A team run paused on its member's booking of Paris, with the member's approval."""
    response = await client.post(TEAM, data={"message": "Book Paris", "stream": "false"})
    run = response.json()
    assert run["status"] == "PAUSED", response.text
    (member,) = run["member_responses"]
    assert member["status"] == "PAUSED"
    listed = await client.get("/approvals", params={"run_id": member["run_id"]})
    [approval] = listed.json()["data"]
    assert (approval["tool_name"], approval["agent_id"]) == ("book_trip", "booking-agent")
    (call,) = member["messages"][-1]["tool_calls"]
    return dict(run) | {"approval": approval, "call": call["id"]}


async def ended(client: Client, run: dict[str, Any]) -> dict[str, Any]:
    path = f"{TEAM}/{run['run_id']}?session_id={run['session_id']}"
    for _ in range(300):
        got = (await client.get(path)).json()
        if got["status"] not in ("PENDING", "RUNNING", "PAUSED"):
            return dict(got)
        await asyncio.sleep(0.02)
    raise AssertionError(f"the team run did not end: {got['status']}")


async def test_the_team_runs_continue_with_tools_resumes_member_and_team(client: Client) -> None:
    run = await paused(client)
    tools = msgspec.json.encode([{"tool_call_id": run["call"], "confirmed": True}]).decode()
    response = await client.post(
        f"{TEAM}/{run['run_id']}/continue",
        data={"tools": tools, "session_id": run["session_id"]},
    )
    events = parse(response.text)
    # the member's resumption, relayed, then the leader's answer
    member = [e.name for e in events if e.data.get("agent_id") == "booking-agent"]
    assert member[0] == "RunContinued" and member[-1] == "RunCompleted"
    assert events[-1].name == "TeamRunCompleted" and events[-1].data["content"] == BOOKED
    done = await ended(client, run)
    assert [m["status"] for m in done["member_responses"]] == ["COMPLETED"]


async def test_resolving_a_members_approval_resumes_member_and_team(client: Client) -> None:
    run = await paused(client)
    approval = run["approval"]
    resolved = await client.post(
        f"/approvals/{approval['id']}/resolve", json={"status": "approved"}
    )
    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["status"] == "approved"
    done = await ended(client, run)
    assert (done["status"], done["content"]) == ("COMPLETED", BOOKED)
    assert [m["status"] for m in done["member_responses"]] == ["COMPLETED"]


async def test_a_members_approval_waits_for_its_team_run_to_pause(client: Client) -> None:
    accepted = await client.post(
        "/teams/mixed-team/runs",
        data={"message": "Book Paris", "stream": "false", "background": "true"},
    )
    run = accepted.json()
    for _ in range(200):  # the booking member has paused; the slow one still works
        if listed := (await client.get("/approvals")).json()["data"]:
            break
        await asyncio.sleep(0.01)
    [approval] = listed
    early = await client.post(f"/approvals/{approval['id']}/resolve", json={"status": "approved"})
    assert early.status_code == 409, early.text
    assert "decide its member's calls once it has paused" in early.json()["detail"]
    path = f"/teams/mixed-team/runs/{run['run_id']}?session_id={run['session_id']}"
    for _ in range(300):
        if (await client.get(path)).json()["status"] == "PAUSED":
            break
        await asyncio.sleep(0.02)
    resolved = await client.post(
        f"/approvals/{approval['id']}/resolve", json={"status": "approved"}
    )
    assert resolved.status_code == 200, resolved.text
    for _ in range(300):
        done = (await client.get(path)).json()
        if done["status"] == "COMPLETED":
            break
        await asyncio.sleep(0.02)
    assert sorted(m["status"] for m in done["member_responses"]) == ["COMPLETED", "COMPLETED"]
    assert "Booked a trip to Paris" in done["content"]
