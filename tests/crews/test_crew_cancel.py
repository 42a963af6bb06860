"""Cancelling a team run while a member's run goes on: the member stops at its next
boundary, the team run with it, and neither is left half-written."""

from __future__ import annotations

import asyncio
import time

from runpoint.core import transcript
from runpoint.core.types import RunStatus
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel, lead_turn
from runpoint.seams.agent import Agent, tool
from runpoint.seams.crew import Crew
from tests.conftest import OpenRunpoint

STEP = 0.2  # seconds a look-up takes


@tool(effect="read")
async def slow_look_up(city: str) -> str:
    """Look a city up, slowly.

    Args:
        city: The city.
    """
    await asyncio.sleep(STEP)
    return f"{city}: found"


agents = [
    Agent(id="looker", model="scripted:demo", tools=[slow_look_up]),
    Crew(id="crew", model="scripted:lead", members=["looker"]),
    # its leader takes a while to delegate
    Crew(
        id="slow-crew",
        model=ScriptedModel(lead_turn, name="scripted:slow-lead", latency=STEP),
        members=["looker"],
    ),
]


async def running_member(rp: Runpoint, crew_run_id: str) -> str:
    for _ in range(500):
        members = await rp.storage.member_runs(crew_run_id)
        if members and members[0].message_count >= 3:  # its first batch is under way
            return members[0].run_id
        await asyncio.sleep(0.01)
    raise AssertionError("the member did not start")


async def test_cancelling_a_team_run_stops_its_running_member_promptly(
    open_runpoint: OpenRunpoint,
) -> None:
    rp = await open_runpoint(agents)
    handle = await rp.create_run(
        CreateRun(agent_id="crew", message="Paris Tokyo Lagos Kyoto Berlin Madrid")
    )
    member_id = await running_member(rp, handle.run.run_id)
    asked = time.monotonic()
    await rp.cancel(handle.run.run_id)
    run = await handle.result()
    took = time.monotonic() - asked
    assert run.status is RunStatus.CANCELLED, run.error
    assert took < 4 * STEP, took  # at the member's next boundary, not its end
    member = await rp.storage.get_run(member_id)
    assert member is not None and member.status is RunStatus.CANCELLED
    assert member.lease_owner is None
    # each run whole: every call it made has its result
    for each in (run, member):
        messages = await rp.storage.read_messages(each.segments, each.message_count)
        assert transcript.unanswered_calls(messages) == [], each.agent_id
    leader = await rp.storage.read_messages(run.segments, run.message_count)
    assert [m.content for m in leader if m.role == "tool"] == [
        "RuntimeError: looker's run was cancelled"
    ]
    await asyncio.sleep(3 * STEP)  # nothing writes to either after
    assert (await rp.storage.get_run(member_id)) == member
    assert (await rp.storage.get_run(run.run_id)) == run


async def test_a_team_run_cancelled_before_it_delegates_gives_no_member_a_task(
    open_runpoint: OpenRunpoint,
) -> None:
    rp = await open_runpoint(agents)
    handle = await rp.create_run(CreateRun(agent_id="slow-crew", message="Paris Tokyo Lagos"))
    await asyncio.sleep(STEP / 2)  # its leader is in its first turn
    asked = time.monotonic()
    await rp.cancel(handle.run.run_id)
    run = await handle.result()
    assert run.status is RunStatus.CANCELLED, run.error
    assert time.monotonic() - asked < 3 * STEP
    assert await rp.storage.member_runs(run.run_id) == []
    messages = await rp.storage.read_messages(run.segments, run.message_count)
    assert [m.content for m in messages if m.role == "tool"] == [
        "RuntimeError: the team run was cancelled: looker was not given the task"
    ]
