"""AgentOS's `GET /agents/{id}/runs` (an agent's runs in a session, from the run index) and
`POST /agents/{id}/runs/{run_id}/resume` (a stream's catch-up by `last_event_index`, from
the event log), on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from runpoint.adapters.litestar import RunpointApp
from tests.http.sse import parse

Client = AsyncTestClient[RunpointApp]
RUNS = "/agents/travel-agent/runs"


async def two_runs(client: Client) -> list[dict[str, Any]]:
    runs = []
    for city in ("Paris", "Tokyo"):
        body = {"message": city, "stream": "false", "session_id": "trips"}
        runs.append((await client.post(RUNS, data=body)).json())
    return runs


async def test_an_agents_runs_in_a_session(client: Client) -> None:
    first, second = await two_runs(client)
    listed = await client.get(RUNS, params={"session_id": "trips"})
    assert listed.status_code == 200, listed.text
    assert [r["run_id"] for r in listed.json()] == [first["run_id"], second["run_id"]]
    assert listed.json()[0]["content"] == first["content"]
    done = await client.get(RUNS, params={"session_id": "trips", "status": "ERROR"})
    assert done.json() == []
    other = await client.get("/agents/booking-agent/runs", params={"session_id": "trips"})
    assert other.json() == []
    assert (await client.get(RUNS, params={"session_id": "nope"})).status_code == 404
    assert (
        await client.get("/agents/nobody/runs", params={"session_id": "trips"})
    ).status_code == 404
    assert (await client.get(RUNS)).status_code == 422  # session_id is required


async def test_resume_catches_up_from_an_index(client: Client) -> None:
    run, _ = await two_runs(client)
    path = f"{RUNS}/{run['run_id']}/resume"
    whole = parse((await client.post(path, data={"session_id": "trips"})).text)
    assert [whole[0].name, whole[-1].name] == ["RunStarted", "RunCompleted"]
    index = whole[2].id - 1  # the third event's index (0-based; ids count from 1)
    resumed = await client.post(path, data={"session_id": "trips", "last_event_index": str(index)})
    assert resumed.status_code == 200, resumed.text
    assert parse(resumed.text) == whole[3:]
    as_json = await client.post(path, json={"last_event_index": index})
    assert parse(as_json.text) == whole[3:]
    missing = await client.post(f"{RUNS}/nope/resume", data={"session_id": "trips"})
    assert missing.status_code == 404
    bad = await client.post(path, data={"last_event_index": "-2"})
    assert bad.status_code == 422
