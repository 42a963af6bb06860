"""AgentOS's approvals over HTTP, on SQLite and PostgreSQL: the inbox of paused calls,
resolved (approve, edit, reject with a note) and the run resumed; a second resolve is a
409; another team's approval is unknown; bad input is a 404 or a 422 naming the field."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from runpoint.adapters import auth
from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.plugins.demo import agents
from tests.http.conftest import bearer

Client = AsyncTestClient[RunpointApp]
RUNS = "/agents/booking-agent/runs"
ADA, BOB = bearer("alpha-key"), bearer("beta-key")


@pytest.fixture
async def client(database: str, keyed_auth: auth.Auth) -> AsyncIterator[Client]:
    async with AsyncTestClient(create_app(agents, database=database, auth=keyed_auth)) as client:
        yield client


async def paused(client: Client, city: str = "Paris") -> dict[str, Any]:
    """A run paused on booking `city`, and its approval as the inbox lists it."""
    response = await client.post(
        RUNS, data={"message": f"Book {city}", "stream": "false"}, headers=ADA
    )
    run = response.json()
    assert run["status"] == "PAUSED", response.text
    listed = await client.get("/approvals", params={"run_id": run["run_id"]}, headers=ADA)
    [approval] = listed.json()["data"]
    return dict(approval)


async def ended(client: Client, approval: dict[str, Any]) -> dict[str, Any]:
    path = f"{RUNS}/{approval['run_id']}?session_id={approval['session_id']}"
    for _ in range(200):
        run = (await client.get(path, headers=ADA)).json()
        if run["status"] not in ("PENDING", "RUNNING", "PAUSED"):
            return dict(run)
        await asyncio.sleep(0.02)
    raise AssertionError("the run did not end")


async def test_the_inbox_lists_counts_and_resolves(client: Client) -> None:
    approval = await paused(client)
    assert approval["status"] == "pending" and approval["run_status"] == "PAUSED"
    assert (approval["tool_name"], approval["tool_args"]) == ("book_trip", {"city": "Paris"})
    assert approval["source_type"] == "agent" and approval["pause_type"] == "confirmation"
    assert approval["source_name"] == "Booking Agent"
    assert (await client.get("/approvals/count", headers=ADA)).json() == {"count": 1}
    one = await client.get(f"/approvals/{approval['id']}", headers=ADA)
    assert one.json() == approval
    resolved = await client.post(
        f"/approvals/{approval['id']}/resolve",
        json={"status": "approved", "resolved_by": "someone-else"},
        headers=ADA,
    )
    assert resolved.status_code == 200, resolved.text
    assert (resolved.json()["status"], resolved.json()["resolved_by"]) == ("approved", "ada")
    run = await ended(client, approval)
    assert run["status"] == "COMPLETED"
    assert run["tools"][0]["result"] == "Booked a trip to Paris."
    status = await client.get(f"/approvals/{approval['id']}/status", headers=ADA)
    assert status.json()["status"] == "approved" and status.json()["resolved_by"] == "ada"
    again = await client.post(
        f"/approvals/{approval['id']}/resolve", json={"status": "rejected"}, headers=ADA
    )
    assert again.status_code == 409
    assert (await client.get("/approvals/count", headers=ADA)).json() == {"count": 0}


async def test_edited_arguments_and_a_note(client: Client) -> None:
    edited = await paused(client)
    bad = await client.post(
        f"/approvals/{edited['id']}/resolve",
        json={"status": "approved", "resolution_data": {"tool_args": {"city": 3}}},
        headers=ADA,
    )
    assert bad.status_code == 422 and "arguments.city" in bad.json()["detail"], bad.text
    await client.post(
        f"/approvals/{edited['id']}/resolve",
        json={"status": "approved", "resolution_data": {"tool_args": {"city": "Lyon"}}},
        headers=ADA,
    )
    [tool] = (await ended(client, edited))["tools"]
    assert (tool["tool_args"], tool["result"]) == ({"city": "Lyon"}, "Booked a trip to Lyon.")

    noted = await paused(client, "Tokyo")
    await client.post(
        f"/approvals/{noted['id']}/resolve",
        json={"status": "rejected", "resolution_data": {"note": "too far"}},
        headers=ADA,
    )
    [tool] = (await ended(client, noted))["tools"]
    assert tool["tool_call_error"] and "too far" in tool["result"]


async def test_bad_input(client: Client) -> None:
    approval = await paused(client)
    maybe = await client.post(
        f"/approvals/{approval['id']}/resolve", json={"status": "maybe"}, headers=ADA
    )
    assert maybe.status_code == 422 and "status" in maybe.json()["detail"], maybe.text
    for unknown in (
        await client.get("/approvals/nope", headers=ADA),
        await client.get("/approvals/nope/status", headers=ADA),
        await client.delete("/approvals/nope", headers=ADA),
        await client.post("/approvals/nope/resolve", json={"status": "approved"}, headers=ADA),
    ):
        assert unknown.status_code == 404, unknown.text


async def test_another_teams_approval_is_unknown(client: Client) -> None:
    approval = await paused(client)
    assert (await client.get("/approvals", headers=BOB)).json()["data"] == []
    assert (await client.get("/approvals/count", headers=BOB)).json() == {"count": 0}
    for response in (
        await client.get(f"/approvals/{approval['id']}", headers=BOB),
        await client.post(
            f"/approvals/{approval['id']}/resolve", json={"status": "approved"}, headers=BOB
        ),
        await client.delete(f"/approvals/{approval['id']}", headers=BOB),
    ):
        assert response.status_code == 404, response.text
    deleted = await client.delete(f"/approvals/{approval['id']}", headers=ADA)
    assert deleted.status_code == 204
    assert (await client.get(f"/approvals/{approval['id']}", headers=ADA)).status_code == 404


async def test_pages(client: Client) -> None:
    for city in ("Paris", "Tokyo", "Lagos"):
        await paused(client, city)
    page = (await client.get("/approvals", params={"limit": 2, "page": 2}, headers=ADA)).json()
    assert page["meta"] == {"page": 2, "limit": 2, "total_pages": 2, "total_count": 3}
    assert [a["tool_args"]["city"] for a in page["data"]] == ["Paris"]
    pending = await client.get("/approvals", params={"status": "approved"}, headers=ADA)
    assert pending.json()["data"] == []
