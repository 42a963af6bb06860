"""The seeds' flows as a client of a mounted runpoint makes them, through a client whose
base URL ends in the prefix: create, timeline, snapshot, continue, a session's checkpoint,
rollback and fork, a streamed run joined by its events; and what the prefix must show in
(the document's `servers`, /docs, the console's page, `/`)."""

from __future__ import annotations

import httpx

from tests.http import sse

from .hosts import HELLO, PREFIX

TRAVEL = "/agents/travel-agent"


async def seed_flows(client: httpx.AsyncClient) -> None:
    created = await client.post(
        f"{TRAVEL}/runs", data={"message": "Compare Paris and Tokyo", "stream": "false"}
    )
    assert created.status_code == 200, created.text
    run = created.json()
    assert run["status"] == "COMPLETED"
    run_id, session_id = run["run_id"], run["session_id"]
    on_session = {"session_id": session_id}

    timeline = await client.get(f"{TRAVEL}/runs/{run_id}/checkpoints", params=on_session)
    assert [c["message_index"] for c in timeline.json()["checkpoints"]] == [3, 5, 6]
    snapshot = await client.get(f"{TRAVEL}/runs/{run_id}/checkpoints/3", params=on_session)
    assert snapshot.json()["snapshot"]["status"] == "RUNNING"
    continued = await client.post(
        f"{TRAVEL}/runs/{run_id}/continue",
        data={
            "session_id": session_id,
            "continue_from": "3",
            "input": "Only Paris",
            "stream": "false",
        },
    )
    assert continued.status_code == 200, continued.text
    assert continued.json()["forked_from_run_id"] == run_id

    checkpoints = f"/v2/agents/sessions/{session_id}/checkpoints"
    made = await client.post(checkpoints, json={"label": "before"})
    assert made.status_code == 201, made.text
    checkpoint_id = made.json()["checkpoint"]["checkpoint_id"]
    await client.post(f"{TRAVEL}/runs", data={**on_session, "message": "Lagos", "stream": "false"})
    rolled = await client.post(f"{checkpoints}/{checkpoint_id}/rollback")
    assert rolled.status_code == 200, rolled.text
    runs = (await client.get(f"/sessions/{session_id}/runs")).json()
    assert len(runs) == 2  # the run after the checkpoint is gone from the session
    forked = await client.post(f"{TRAVEL}/sessions/{session_id}/fork")
    assert forked.status_code in (200, 201), forked.text
    assert forked.json()["session_id"] != session_id
    missing = await client.get(f"/v2/agents/sessions/{session_id}/checkpoints/nope")
    assert set(missing.json()) == {"id", "message", "request_id"}  # the /v2/ dialect's error


async def streamed_run_and_join(client: httpx.AsyncClient) -> None:
    streamed = await client.post(f"{TRAVEL}/runs", data={"message": "Paris", "stream": "true"})
    events = list(sse.parse(streamed.text))
    assert events[0].name == "RunStarted" and events[-1].name == "RunCompleted"
    run = events[-1].data
    joined = await client.get(
        f"{TRAVEL}/runs/{run['run_id']}/events",
        params={"session_id": run["session_id"]},
        headers={"Last-Event-ID": str(events[1].id)},
    )
    assert joined.status_code == 200
    assert [e.name for e in sse.parse(joined.text)] == [e.name for e in events[2:]]


async def prefix_shows(client: httpx.AsyncClient) -> None:
    document = (await client.get("/openapi.json")).json()
    assert document["servers"] == [{"url": PREFIX}]
    docs = (await client.get("/docs")).text
    assert f'"{PREFIX}/docs/assets/swagger-ui-bundle.js"' in docs
    assert (await client.get("/docs/assets/swagger-ui.css")).status_code == 200
    home = await client.get("/")
    assert (home.status_code, home.headers["location"]) == (302, f"{PREFIX}/ui/")
    page = await client.get("/ui")
    assert (page.status_code, page.headers["location"]) == (308, f"{PREFIX}/ui/")
    console = await client.get("/ui/")
    assert 'src="app.js"' in console.text  # relative: it loads under the prefix
    assert (await client.get("/ui/api.js")).status_code == 200


async def host_routes_work(host: httpx.AsyncClient) -> None:
    hello = await host.get("/hello")
    assert hello.status_code == 200 and HELLO in hello.text
