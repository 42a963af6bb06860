"""DELETE of a session forked elsewhere: 204, and its fork answers byte for byte as before."""

from __future__ import annotations

from litestar import Litestar
from litestar.testing import AsyncTestClient

Client = AsyncTestClient[Litestar]


async def reads(client: Client, session_id: str) -> list[bytes]:
    """The session's runs, each one's timeline and each snapshot, as served."""
    found = [(await client.get(f"/sessions/{session_id}/runs")).content]
    for run in (await client.get(f"/sessions/{session_id}/runs")).json():
        base = f"/agents/travel-agent/runs/{run['run_id']}"
        found.append((await client.get(base, params={"session_id": session_id})).content)
        timeline = await client.get(f"{base}/checkpoints", params={"session_id": session_id})
        found.append(timeline.content)
        for checkpoint in timeline.json()["checkpoints"]:
            at = f"{base}/checkpoints/{checkpoint['message_index']}"
            found.append((await client.get(at, params={"session_id": session_id})).content)
    return found


async def test_a_source_session_is_deleted_under_its_fork(client: Client) -> None:
    body = {"message": "Paris, Tokyo and Lagos", "stream": "false"}
    run = (await client.post("/agents/travel-agent/runs", data=body)).json()
    source = run["session_id"]
    fork = (await client.post(f"/agents/travel-agent/sessions/{source}/fork")).json()
    before = await reads(client, fork["session_id"])
    assert len(before) > 4
    assert (await client.delete(f"/sessions/{source}")).status_code == 204
    assert (await client.get(f"/sessions/{source}")).status_code == 404
    assert await reads(client, fork["session_id"]) == before
    assert (await client.delete(f"/sessions/{fork['session_id']}")).status_code == 204
