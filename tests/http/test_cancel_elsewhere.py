"""A cancel of a run that another process executes: the run answers RUNNING with
`cancel_requested`, on the cancel and on every read until that process stops it."""

from __future__ import annotations

import time

import httpx

from runpoint.adapters.litestar import build
from runpoint.core.types import Run, RunStatus, Segment
from runpoint.facade import Runpoint
from runpoint.plugins.demo import agents


async def test_a_cancel_of_a_run_in_another_process_is_requested(database: str) -> None:
    rp = Runpoint(agents, database=database)
    transport = httpx.ASGITransport(app=build(rp))
    async with rp, httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        created = await client.post(
            "/agents/travel-agent/runs", json={"message": "Paris", "stream": False}
        )
        assert created.json()["cancel_requested"] is False
        session_id = created.json()["session_id"]
        elsewhere = await rp.storage.start_in_session(
            Run(
                run_id="elsewhere",
                session_id=session_id,
                agent_id="travel-agent",
                status=RunStatus.RUNNING,
                segments=[Segment("elsewhere", 0)],
                lease_owner="another-process",
                lease_expires_at=time.time() + 600,
            )
        )
        path = f"/agents/travel-agent/runs/{elsewhere.run_id}"

        cancelled = await client.post(f"{path}/cancel", params={"session_id": session_id})
        assert cancelled.status_code == 200, cancelled.text
        answer = cancelled.json()
        assert (answer["status"], answer["cancel_requested"]) == ("RUNNING", True)
        got = (await client.get(path, params={"session_id": session_id})).json()
        assert (got["status"], got["cancel_requested"]) == ("RUNNING", True)
