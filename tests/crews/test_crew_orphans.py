"""Member runs that their team run left in flight: those of a leader from before delegating
turns were written first (asked again after a crash, it named its calls afresh and started
new members), or of a process that died while its team run was cancelled or given up.
Nobody resumes them (their leader delegates no more): a team run that ends leaves none
RUNNING, and the lease watch (at start-up, and after) settles those an ended team run left."""

from __future__ import annotations

import asyncio
import logging

import msgspec
import pytest

from runpoint.core.types import IN_FLIGHT, Message, Run, RunStatus, Segment, now
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.demo import agents as demo_agents
from runpoint.seams.crew import Crew, member_run_id
from tests.conftest import OpenRunpoint

agents = [*demo_agents, Crew(id="crew", model="scripted:lead", members=["travel-agent"])]


async def left_behind(rp: Runpoint, crew_run: Run) -> Run:
    """A member run of `crew_run` in flight whose process is gone, under a delegation call
    its leader no longer makes: as a leader from before the fix left them."""
    run_id = member_run_id(crew_run.run_id, "call_lost")
    member = Run(
        run_id=run_id,
        session_id=crew_run.session_id,
        agent_id="travel-agent",
        team_id=crew_run.team_id,
        input="Lima",
        status=RunStatus.RUNNING,
        segments=[Segment(run_id, 0)],
        message_count=1,
        parent_run_id=crew_run.run_id,
        parent_tool_call_id="call_lost",
        lease_owner="a-process-long-gone",
        lease_expires_at=now() - 60,
    )
    await rp.storage.create_runs([member], {run_id: [Message(role="user", content="Lima")]})
    return member


async def test_a_team_run_that_ends_leaves_no_member_running(
    open_runpoint: OpenRunpoint,
) -> None:
    rp = await open_runpoint(agents)
    handle = await rp.create_run(CreateRun(agent_id="crew", message="Paris Tokyo"))
    orphan = await left_behind(rp, handle.run)
    run = await handle.result()
    assert run.status is RunStatus.COMPLETED, run.error
    members = {m.run_id: m for m in await rp.storage.member_runs(run.run_id)}
    assert [m.status for m in members.values() if m.status in IN_FLIGHT] == []
    settled = members[orphan.run_id]
    assert settled.status is RunStatus.CANCELLED and settled.lease_owner is None
    # its siblings, delegated by the leader, are as they ended
    assert {m.status for i, m in members.items() if i != orphan.run_id} == {RunStatus.COMPLETED}


async def test_recovery_settles_the_members_an_ended_team_run_left(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="runpoint.recovery")
    async with Runpoint(agents, database=database) as rp:
        run = await (await rp.create_run(CreateRun(agent_id="crew", message="Paris"))).result()
        going = await (await rp.create_run(CreateRun(agent_id="crew", message="Oslo"))).result()
        # a database from before: the team runs ended, a member of each left RUNNING
        orphan = await left_behind(rp, run)
        going = msgspec.structs.replace(going, status=RunStatus.PAUSED)  # this one goes on
        kept = await left_behind(rp, going)
        await rp.storage.save(going, [], None)

    async with Runpoint(agents, database=database, lease_seconds=0.3) as again:
        async with asyncio.timeout(30):
            while (got := await again.storage.get_run(orphan.run_id)) and got.status in IN_FLIGHT:  # noqa: ASYNC110 (the lease watch's)
                await asyncio.sleep(0.05)
        assert got is not None and got.status is RunStatus.CANCELLED
        assert got.in_doubt == []  # no call of it had started
        await asyncio.sleep(1)  # beats of the watch: a PAUSED team run's member is its own
        still = await again.storage.get_run(kept.run_id)
        assert still is not None and still.status is RunStatus.RUNNING
        # the log says what became of it, not that it was resumed
        said = [r.getMessage() for r in caplog.records if orphan.run_id in r.getMessage()]
        assert said == [f"member run {orphan.run_id}, left by its ended team run, cancelled"]
