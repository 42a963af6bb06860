"""A fork of a session whose run is paused for a person has that pause too: its copy of
the run waits in the inbox with an approval of its own, which decides the copy and only
the copy, as the source's decides the source. So do a fork from a session checkpoint, a
rollback, and a fork of a team's session paused by its member. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from runpoint.adapters import auth
from runpoint.adapters.litestar import create_app
from runpoint.plugins import demo
from runpoint.seams.crew import Crew
from tests.http.test_approvals import ADA, RUNS, Client, ended, paused

TEAM = "/teams/booking-team/runs"


@pytest.fixture
async def client(database: str, keyed_auth: auth.Auth) -> AsyncIterator[Client]:
    agents = [
        *demo.agents,
        Crew(id="booking-team", model="scripted:lead", members=["booking-agent"]),
    ]
    async with AsyncTestClient(create_app(agents, database=database, auth=keyed_auth)) as client:
        yield client


async def pending(client: Client, session_id: str) -> list[dict[str, Any]]:
    listed = await client.get(
        "/approvals", params={"session_id": session_id, "status": "pending"}, headers=ADA
    )
    assert listed.status_code == 200, listed.text
    found: list[dict[str, Any]] = listed.json()["data"]
    return found


async def resolve(client: Client, approval: dict[str, Any], body: dict[str, Any]) -> None:
    resolved = await client.post(f"/approvals/{approval['id']}/resolve", json=body, headers=ADA)
    assert resolved.status_code == 200, resolved.text


async def test_a_fork_of_a_paused_session_has_its_own_approval(client: Client) -> None:
    source = await paused(client)
    forked = await client.post(
        f"/agents/booking-agent/sessions/{source['session_id']}/fork", headers=ADA
    )
    assert forked.status_code == 200, forked.text
    fork_id = forked.json()["session_id"]
    [copy] = await pending(client, fork_id)
    run = (await client.get(f"{RUNS}/{copy['run_id']}?session_id={fork_id}", headers=ADA)).json()
    assert (run["status"], run["forked_from_run_id"]) == ("PAUSED", source["run_id"])
    assert copy["id"] != source["id"] and copy["run_status"] == "PAUSED"
    same = ("tool_name", "tool_args", "pause_type", "requirements", "agent_id", "user_id")
    assert {k: copy[k] for k in same} == {k: source[k] for k in same}
    assert (await client.get("/approvals/count", headers=ADA)).json() == {"count": 2}

    # each decides its own run: the source booked, the copy rejected with the person's note
    await resolve(client, source, {"status": "approved"})
    assert (await ended(client, source))["tools"][0]["result"] == "Booked a trip to Paris."
    assert [a["id"] for a in await pending(client, fork_id)] == [copy["id"]]
    await resolve(client, copy, {"status": "rejected", "resolution_data": {"note": "Not now"}})
    rejected = await ended(client, copy)
    assert rejected["status"] == "COMPLETED"
    assert "Not now" in (rejected["tools"][0]["result"] or "")
    assert (await client.get("/approvals/count", headers=ADA)).json() == {"count": 0}


async def test_a_decided_pause_is_not_copied(client: Client) -> None:
    source = await paused(client)
    await resolve(client, source, {"status": "approved"})
    await ended(client, source)
    forked = await client.post(
        f"/agents/booking-agent/sessions/{source['session_id']}/fork", headers=ADA
    )
    assert await pending(client, forked.json()["session_id"]) == []


async def test_a_session_checkpoints_fork_and_rollback_have_its_pause(client: Client) -> None:
    source = await paused(client)
    sessions = f"/v2/agents/sessions/{source['session_id']}"
    made = await client.post(f"{sessions}/checkpoints", json={"label": "paused"}, headers=ADA)
    assert made.status_code in (200, 201), made.text
    checkpoint_id = made.json()["checkpoint"]["checkpoint_id"]
    # the source goes on past the pause; the checkpoint still holds it
    await resolve(client, source, {"status": "approved"})
    await ended(client, source)

    body = {"from_checkpoint_id": checkpoint_id, "count": 2}
    forked = await client.post(f"{sessions}/fork", json=body, headers=ADA)
    assert forked.status_code in (200, 201), forked.text
    copies = [(await pending(client, s["session_id"])) for s in forked.json()["sessions"]]
    assert [len(c) for c in copies] == [1, 1]
    assert copies[0][0]["id"] != copies[1][0]["id"]
    assert all(c[0]["requirements"] == source["requirements"] for c in copies)

    rolled = await client.post(f"{sessions}/checkpoints/{checkpoint_id}/rollback", headers=ADA)
    assert rolled.status_code == 200, rolled.text
    [back] = await pending(client, source["session_id"])
    assert back["run_id"] != source["run_id"]
    await resolve(client, back, {"status": "approved"})
    assert (await ended(client, back))["tools"][0]["result"] == "Booked a trip to Paris."


async def test_a_fork_of_a_team_session_paused_by_its_member(client: Client) -> None:
    response = await client.post(
        TEAM, data={"message": "Book Paris", "stream": "false"}, headers=ADA
    )
    team_run = response.json()
    assert team_run["status"] == "PAUSED", response.text
    forked = await client.post(
        f"/teams/booking-team/sessions/{team_run['session_id']}/fork", headers=ADA
    )
    fork_id = forked.json()["session_id"]
    [copy] = await pending(client, fork_id)
    [copied_run] = (await client.get(f"/sessions/{fork_id}/runs", headers=ADA)).json()
    # the copy of the member run's approval, under the copy of the team run
    assert copy["agent_id"] == "booking-agent"
    assert copy["parent_run_id"] == copied_run["run_id"]
    await resolve(client, copy, {"status": "approved"})
    path = f"{TEAM}/{copied_run['run_id']}?session_id={fork_id}"
    for _ in range(300):
        done = (await client.get(path, headers=ADA)).json()
        if done["status"] == "COMPLETED":
            break
        await asyncio.sleep(0.02)
    assert done["status"] == "COMPLETED"
    assert done["content"].endswith("Paris: Booked a trip to Paris..")
    # the source team run still waits on its own member's approval
    source = await client.get(
        f"{TEAM}/{team_run['run_id']}?session_id={team_run['session_id']}", headers=ADA
    )
    assert source.json()["status"] == "PAUSED"
    assert len(await pending(client, team_run["session_id"])) == 1
