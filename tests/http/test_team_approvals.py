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
from runpoint.seams.model import ModelRequest, ModelResponse
from tests.http.sse import parse

Client = AsyncTestClient[RunpointApp]
TEAM = "/teams/booking-team/runs"
FORM = {"stream": "false"}
BOOKED = "The team says: booking-agent: Here is what I found. Paris: Booked a trip to Paris.."


@pytest.fixture
def held() -> asyncio.Event:
    """Each turn of `slow-agent` waits until the test sets it."""
    return asyncio.Event()


@pytest.fixture
async def client(database: str, held: asyncio.Event) -> AsyncIterator[Client]:
    async def held_turn(request: ModelRequest) -> ModelResponse:
        await held.wait()
        return demo_turn(request)

    agents = [
        *demo.agents,
        Crew(id="booking-team", model="scripted:lead", members=["booking-agent"]),
        Agent(
            id="slow-agent",
            model=ScriptedModel(held_turn, name="scripted:slow"),
            tools=[demo.get_population],
        ),
        # one member pauses at once, the other works until the test lets it go
        Crew(id="mixed-team", model="scripted:lead", members=["booking-agent", "slow-agent"]),
        # both members pause on a call of the same id (the scripted model numbers its calls)
        Agent(id="booking-twin", model="scripted:demo", tools=[demo.book_trip]),
        Crew(id="twin-team", model="scripted:lead", members=["booking-agent", "booking-twin"]),
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
    assert approval["parent_run_id"] == run["run_id"]  # the team run, for a client to open
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


async def test_a_members_approval_waits_for_its_team_run_to_pause(
    client: Client, held: asyncio.Event
) -> None:
    accepted = await client.post(
        "/teams/mixed-team/runs",
        data={"message": "Book Paris", "stream": "false", "background": "true"},
    )
    run = accepted.json()
    async with asyncio.timeout(30):  # the booking member has paused; the slow one is held
        while not (listed := (await client.get("/approvals")).json()["data"]):  # noqa: ASYNC110 (polls the server)
            await asyncio.sleep(0.01)
    [approval] = listed
    early = await client.post(f"/approvals/{approval['id']}/resolve", json={"status": "approved"})
    assert early.status_code == 409, early.text
    assert "decide its member's calls once it has paused" in early.json()["detail"]
    held.set()
    path = f"/teams/mixed-team/runs/{run['run_id']}?session_id={run['session_id']}"
    async with asyncio.timeout(30):  # the slow member ends, and the team run pauses
        while (await client.get(path)).json()["status"] != "PAUSED":  # noqa: ASYNC110 (polls the server)
            await asyncio.sleep(0.02)
    resolved = await client.post(
        f"/approvals/{approval['id']}/resolve", json={"status": "approved"}
    )
    assert resolved.status_code == 200, resolved.text
    async with asyncio.timeout(30):
        while (done := (await client.get(path)).json())["status"] != "COMPLETED":  # noqa: ASYNC110 (polls the server)
            await asyncio.sleep(0.02)
    assert sorted(m["status"] for m in done["member_responses"]) == ["COMPLETED", "COMPLETED"]
    assert "Booked a trip to Paris" in done["content"]


async def test_members_paused_on_one_call_id_are_each_decided_by_their_member_run(
    client: Client,
) -> None:
    response = await client.post("/teams/twin-team/runs", data={"message": "Book Paris"} | FORM)
    run = response.json()
    assert run["status"] == "PAUSED", response.text
    members = {m["agent_id"]: m for m in run["member_responses"]}
    [mine] = members["booking-agent"]["messages"][-1]["tool_calls"]
    [twins] = members["booking-twin"]["messages"][-1]["tool_calls"]
    assert mine["id"] == twins["id"]
    path = f"/teams/twin-team/runs/{run['run_id']}/continue"
    tools = msgspec.json.encode([{"tool_call_id": mine["id"], "confirmed": True}]).decode()
    form = {"tools": tools, "session_id": run["session_id"]} | FORM
    ambiguous = await client.post(path, data=form)
    assert ambiguous.status_code == 400, ambiguous.text
    assert "member_run_id" in ambiguous.json()["detail"]
    # confirmed for the first member only; the twin still waits, and the team run with it
    first = members["booking-agent"]["run_id"]
    decided = await client.post(path, data=form | {"member_run_id": first})
    assert decided.status_code == 200, decided.text
    assert decided.json()["status"] == "PAUSED"
    statuses = {m["agent_id"]: m["status"] for m in decided.json()["member_responses"]}
    assert statuses == {"booking-agent": "COMPLETED", "booking-twin": "PAUSED"}
    # the twin's approval names its own member run: rejected, its booking is not made
    twin = members["booking-twin"]["run_id"]
    listed = (await client.get("/approvals", params={"run_id": twin})).json()["data"]
    [approval] = [a for a in listed if a["status"] == "pending"]
    resolved = await client.post(
        f"/approvals/{approval['id']}/resolve", json={"status": "rejected"}
    )
    assert resolved.status_code == 200, resolved.text
    got = f"/teams/twin-team/runs/{run['run_id']}?session_id={run['session_id']}"
    for _ in range(300):
        if (done := (await client.get(got)).json())["status"] == "COMPLETED":
            break
        await asyncio.sleep(0.02)
    contents = {m["agent_id"]: m["content"] for m in done["member_responses"]}
    assert "Booked a trip to Paris" in contents["booking-agent"]
    assert "Booked a trip to Paris" not in contents["booking-twin"]
