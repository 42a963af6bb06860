"""A sweep killed (SIGKILL) mid-batch leaves every run whole, and the next sweep finishes."""

from __future__ import annotations

import pytest

from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.seams.retention import Retention
from tests.kernel.crashing_session import kill_frozen
from tests.kernel.test_retention import reads, stored


@pytest.mark.parametrize("database", ["sqlite", "postgresql"], indirect=True)
async def test_a_sweep_killed_mid_batch_leaves_every_run_whole(database: str) -> None:
    async with Runpoint(agents, database=database) as rp:
        made = [
            await (
                await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris and Tokyo"))
            ).result()
        ]
        made.append(
            await (
                await rp.create_run(CreateRun(agent_id="travel-agent", message="Lagos"))
            ).result()
        )
        again = ContinueRun(run_id=made[0].run_id, continue_from=3, input="Only Paris")
        fork = await rp.continue_run(again)
        made.append(await fork.result())
        ids = [r.run_id for r in made]
        before = await reads(rp, ids)
    await kill_frozen("tests.kernel.crashing_sweep", database)
    async with Runpoint(agents, database=database, retention=Retention(runs=0)) as rp:
        assert await reads(rp, ids) == before, "nothing half-deleted"
        assert sorted((await rp.sweeper.sweep_all()).run_ids) == sorted(ids)
        assert await stored(rp) == 0
