"""Idempotency-Keys survive the death of the process that claimed them: once its claims'
lease ran out, each retry gets the run that was made, or makes it; one run per key, even
when the first request's process only stalled and goes on afterwards."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping

from runpoint import hookimpl
from runpoint.core.types import RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel
from runpoint.seams.host import PluginHost
from runpoint.seams.model import Model, ModelProvider, ModelResponse
from tests.kernel import crashing_keys

agent = crashing_keys.agent


async def test_retries_of_keys_whose_process_died_get_one_run_each(database: str) -> None:
    await crashing_keys.kill(database)
    # with the lease, a retry waits about a second; without it, its wait ends in Conflict
    async with Runpoint([agent], database=database, lease_seconds=0.5, busy_timeout=10) as rp:
        retries = [crashing_keys.create(rp, key) for key in crashing_keys.KEYS]
        ended = [await h.result() for h in await asyncio.gather(*retries)]
        sessions = await rp.list_sessions()
        runs = [r for s in sessions for r in await rp.list_runs(s.session_id)]
    assert {r.status for r in ended} == {RunStatus.COMPLETED}
    assert len(runs) == len(sessions) == len(crashing_keys.KEYS)  # one run per key
    assert {r.run_id for r in runs} == {r.run_id for r in ended}
    assert {r.input for r in runs} == {f"book {key}" for key in crashing_keys.KEYS}


class Stall:
    """Models `stall:...`; with `stalls`, making the first one blocks its process (the
    event loop: no lease is renewed) until `resume` is set, as a process stalls."""

    def __init__(self, *, stalls: bool) -> None:
        self.stalls = stalls
        self.stalled, self.resume = threading.Event(), threading.Event()

    @hookimpl
    def runpoint_model_providers(self) -> Mapping[str, ModelProvider]:
        return {"stall": self.model}

    def model(self, name: str) -> Model:
        if self.stalls:
            self.stalled.set()
            self.resume.wait(30)
        return ScriptedModel([ModelResponse(content="done")], name=f"stall:{name}")


async def test_a_request_that_stalled_past_its_claim_gets_the_retrys_run(database: str) -> None:
    stalling = Stall(stalls=True)

    def elsewhere(run_id: str) -> str:
        """The same request in another process (a thread with its own event loop), once
        the first stalled in it: its model, named in the request, is made after the key is
        claimed and before the run is. The first goes on when this one was answered."""
        assert stalling.stalled.wait(30)
        try:
            return asyncio.run(retry(run_id))
        finally:
            stalling.resume.set()

    async def retry(run_id: str) -> str:
        host = PluginHost([Stall(stalls=False)])
        async with Runpoint([agent], database=database, host=host, lease_seconds=0.3) as other:
            handle = await other.continue_run(
                ContinueRun(run_id=run_id, model="stall:x"), idempotency_key="k"
            )
            await handle.result()
        return handle.run.run_id

    host = PluginHost([stalling])
    async with Runpoint([agent], database=database, host=host, lease_seconds=0.3) as rp:
        source = await (await rp.create_run(CreateRun(agent_id=agent.id, message="Paris"))).result()
        ask = rp.continue_run(
            ContinueRun(run_id=source.run_id, model="stall:x"), idempotency_key="k"
        )
        first = asyncio.create_task(ask)
        made = await asyncio.to_thread(elsewhere, source.run_id)
        answered = await first
        runs = await rp.list_runs(source.session_id)
    assert answered.run.run_id == made
    assert [r.run_id for r in runs] == [source.run_id, made]  # the stalled request made none
