"""AgentOS's job queue over HTTP, on SQLite and PostgreSQL: a team's runs as jobs with
their attempts and last error, stats, and a failed run requeued: resumed in the background
from where it failed, no finished tool call run again, once per Idempotency-Key."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from runpoint.adapters import auth
from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.plugins.demo import agents
from runpoint.plugins.scripted import ScriptedModel, demo_turn
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import ModelRequest
from tests.http.conftest import bearer

Client = AsyncTestClient[RunpointApp]
ADA, BOB = bearer("alpha-key"), bearer("beta-key")
calls: Counter[str] = Counter()


@tool
def book_hotel(city: str) -> str:
    """Book a hotel (a side effect: it must never run twice)."""
    calls[city] += 1
    return f"Hotel booked in {city}."


class FailsOnce:
    """The demo model, but its turn after the first tool batch fails once."""

    def __init__(self) -> None:
        self.model = ScriptedModel(demo_turn, name="scripted:demo")
        self.failed = False

    @property
    def name(self) -> str:
        return self.model.name

    def stream(self, request: ModelRequest) -> Any:
        if not self.failed and any(m.role == "tool" for m in request.messages):
            self.failed = True
            raise RuntimeError("the model's vendor is down")
        return self.model.stream(request)


@pytest.fixture
async def client(database: str, keyed_auth: auth.Auth) -> AsyncIterator[Client]:
    calls.clear()
    hotels = Agent(id="hotel-agent", model=FailsOnce(), tools=[book_hotel])
    app = create_app([*agents, hotels], database=database, auth=keyed_auth)
    async with AsyncTestClient(app) as client:
        yield client


async def failed_run(client: Client) -> dict[str, Any]:
    response = await client.post(
        "/agents/hotel-agent/runs",
        data={"message": "Paris and Tokyo", "stream": "false"},
        headers=ADA,
    )
    run = response.json()
    assert run.get("status") == "ERROR", response.text
    return dict(run)


async def test_jobs_stats_and_a_requeue_that_runs_nothing_twice(client: Client) -> None:
    run = await failed_run(client)
    assert calls == {"Paris": 1}
    failed = (await client.get("/queue/jobs", params={"status": "failed"}, headers=ADA)).json()
    [job] = failed["data"]
    assert (job["id"], job["component_id"], job["status"]) == (
        run["run_id"],
        "hotel-agent",
        "failed",
    )
    assert job["attempt"] == 1 and "vendor is down" in job["error"]
    assert failed["meta"]["total_count"] == 1
    stats = (await client.get("/queue/stats", headers=ADA)).json()
    assert stats["failed"] == 1 and stats["total"] == 1
    assert (await client.get("/queue/stats", headers=BOB)).json()["total"] == 0

    key = {"Idempotency-Key": "requeue-1"}
    path = f"/queue/jobs/{run['run_id']}/requeue"
    first = await client.post(path, headers=ADA | key)
    assert first.status_code == 200, first.text
    assert first.json()["status"] in ("queued", "running", "completed")
    for _ in range(200):
        job = (await client.get(f"/queue/jobs/{run['run_id']}", headers=ADA)).json()
        if job["status"] == "completed":
            break
        await asyncio.sleep(0.02)
    assert job["status"] == "completed" and job["error"] is None
    assert calls == {"Paris": 1, "Tokyo": 1}  # Paris's finished call was not run again
    again = await client.post(path, headers=ADA | key)  # a retry: the first answer
    assert again.status_code == 200 and again.json()["id"] == run["run_id"]
    assert calls == {"Paris": 1, "Tokyo": 1}
    # a run that did not fail is a 409; an unknown or another team's job a 404
    assert (await client.post(path, headers=ADA)).status_code == 409
    assert (await client.post(path, headers=BOB)).status_code == 404
    assert (await client.get("/queue/jobs/nope", headers=ADA)).status_code == 404
    assert (await client.post("/queue/jobs/nope/requeue", headers=ADA)).status_code == 404


async def test_pages_and_filters(client: Client) -> None:
    for city in ("Paris", "Tokyo", "Lagos"):
        await client.post(
            "/agents/travel-agent/runs", data={"message": city, "stream": "false"}, headers=ADA
        )
    page = (await client.get("/queue/jobs", params={"limit": 2, "page": 2}, headers=ADA)).json()
    assert page["meta"] == {"page": 2, "limit": 2, "total_pages": 2, "total_count": 3}
    assert [j["payload"]["input"] for j in page["data"]] == ["Paris"]
    queued = await client.get("/queue/jobs", params={"status": "queued"}, headers=ADA)
    assert queued.json()["data"] == []
    assert (await client.get("/queue/jobs", headers=BOB)).json()["data"] == []
