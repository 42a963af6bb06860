"""Time travel in a team run's tree: continue from a checkpoint inside a member's run (a new
team run and a new member run, copy-on-write, nothing before that point run again, the
leader answering with the member's new result), the tree's timeline, and session forks
that keep the member runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runpoint.core.errors import Conflict, InvalidBoundary, InvalidRequest, NotFound
from runpoint.core.types import Run, RunStatus
from runpoint.facade import ContinueRun, CreateRun, ForkSession, Runpoint
from runpoint.plugins import demo
from runpoint.reads import run_trees
from runpoint.runs.edits import ReplaceUserMessage
from runpoint.seams.agent import Agent, tool
from runpoint.seams.crew import Crew, member_run_id
from tests.conftest import OpenRunpoint


async def team_run(rp: Runpoint, message: str = "Paris and Kyoto") -> Run:
    run = await (await rp.create_run(CreateRun(agent_id="travel-team", message=message))).result()
    assert run.status is RunStatus.COMPLETED, run.error
    return run


async def from_member(rp: Runpoint, run: Run, member: Run, **given: Any) -> Run:
    """The team run a continue of `run` from its member run `member` made, once it stops."""
    request = ContinueRun(
        run_id=run.run_id, agent_id=run.agent_id, member_run_id=member.run_id, **given
    )
    new = await (await rp.continue_run(request)).result()
    assert new.status is RunStatus.COMPLETED, new.error
    return new


async def members_by_agent(rp: Runpoint, run: Run) -> dict[str, Run]:
    return {m.agent_id: m for m in await rp.storage.member_runs(run.run_id)}


async def test_continue_from_a_members_checkpoint_reruns_nothing_before_it(
    open_runpoint: OpenRunpoint,
) -> None:
    await continue_from_a_members_checkpoint(await open_runpoint(demo.agents))


async def test_continue_from_a_members_checkpoint_in_memory() -> None:
    async with Runpoint(demo.agents, database="memory:") as rp:
        await continue_from_a_members_checkpoint(rp)


async def continue_from_a_members_checkpoint(rp: Runpoint) -> None:
    demo.VISITS.clear()
    source = await team_run(rp)
    before = await members_by_agent(rp, source)
    planner = before["planner-agent"]
    assert demo.VISITS == ["Paris", "Kyoto"]

    # the planner's checkpoint after it wrote Paris down (its first tool batch), a new ask
    request = ContinueRun(
        run_id=source.run_id,
        agent_id="travel-team",
        session_id=source.session_id,
        member_run_id=planner.run_id,
        continue_from=3,
        input="Lima too",
    )
    run = await (await rp.continue_run(request)).result()
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.run_id != source.run_id
    assert (run.forked_from_run_id, run.forked_from_message_index) == (source.run_id, 2)
    # only the member's new step ran: Paris (before the checkpoint) was not written again,
    # and the travel agent (beside it) did not run at all
    assert demo.VISITS == ["Paris", "Kyoto", "Lima"]
    # the leader answered with the member's new result
    assert run.content == (
        "The team says: travel-agent: Here is what I found. Paris: 2.1M; Kyoto: 1.5M.; "
        "planner-agent: Here is what I found. Lima: Lima is in the plan.."
    )

    [new_planner] = await rp.storage.member_runs(run.run_id)  # its one member run of its own
    assert new_planner.run_id == member_run_id(run.run_id, planner.parent_tool_call_id or "")
    assert (new_planner.agent_id, new_planner.status) == ("planner-agent", RunStatus.COMPLETED)
    assert (new_planner.forked_from_run_id, new_planner.forked_from_message_index) == (
        planner.run_id,
        3,
    )
    assert new_planner.recoveries == 0
    detail = await rp.get_run(new_planner.run_id)
    old = await rp.get_run(planner.run_id)
    assert [m.id for m in detail.messages[:3]] == [m.id for m in old.messages[:3]]  # shared
    assert detail.messages[3].content == "Lima too"

    # the tree: the travel agent's run is the source's, the planner's the new one
    tree = await run_trees.timeline(rp.storage, run)
    assert [(c.message_index, c.run_id) for c, _ in tree.checkpoints] == [
        (4, run.run_id),
        (5, run.run_id),
    ]
    [(_, under), (_, after)] = tree.checkpoints
    assert [(m.member.run.run_id, m.member.run.parent_run_id) for m in under] == [
        (before["travel-agent"].run_id, source.run_id),
        (new_planner.run_id, run.run_id),
    ]
    assert after == [] and tree.pending == []
    # the new member run's timeline: its source's checkpoint at 3, then its own
    assert [(c.message_index, c.run_id) for c in under[1].checkpoints] == [
        (3, planner.run_id),
        (6, new_planner.run_id),
        (7, new_planner.run_id),
    ]
    # the source is untouched
    assert await members_by_agent(rp, source) == before
    assert (await rp.get_run(source.run_id)).run.content == source.content


async def test_continue_from_a_members_checkpoint_with_edits_and_from_an_inherited_member(
    open_runpoint: OpenRunpoint,
) -> None:
    rp = await open_runpoint(demo.agents)
    source = await team_run(rp, "Paris")
    travel = (await members_by_agent(rp, source))["travel-agent"]
    first = await from_member(
        rp, source, travel, continue_from=1, edits=[ReplaceUserMessage("Tokyo")]
    )
    assert "travel-agent: Here is what I found. Tokyo: " in (first.content or "")
    assert "planner-agent: Here is what I found. Paris" in (first.content or "")
    # the planner's run the new team run inherited is addressed through it, and continued
    planner = (await members_by_agent(rp, source))["planner-agent"]
    second = await from_member(rp, first, planner, continue_from="last_user", input="Cairo")
    assert "travel-agent: Here is what I found. Tokyo" in (second.content or "")
    assert "planner-agent: Here is what I found. Cairo: Cairo is in the plan." in (
        second.content or ""
    )


async def test_bad_member_continues_are_refused(open_runpoint: OpenRunpoint) -> None:
    rp = await open_runpoint(demo.agents)
    one, other = await team_run(rp, "Paris"), await team_run(rp, "Kyoto")
    planner = (await members_by_agent(rp, other))["planner-agent"]

    def request(**given: object) -> ContinueRun:
        fields = {"run_id": one.run_id, "agent_id": "travel-team"} | given
        return ContinueRun(**fields)  # type: ignore[arg-type]

    with pytest.raises(NotFound, match=f"member run {planner.run_id} not found in team run"):
        await rp.continue_run(request(member_run_id=planner.run_id))  # another team run's
    with pytest.raises(NotFound):
        await rp.continue_run(request(member_run_id="nobody"))
    mine = (await members_by_agent(rp, one))["planner-agent"]
    with pytest.raises(InvalidBoundary):
        await rp.continue_run(request(member_run_id=mine.run_id, continue_from=99))
    with pytest.raises(InvalidRequest):
        await rp.continue_run(request(member_run_id=mine.run_id, regenerate=True))
    with pytest.raises(InvalidRequest):
        await rp.continue_run(request(member_run_id=mine.run_id, input=" "))
    with pytest.raises(NotFound):  # an agent's run has no members
        agent_run = await (
            await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))
        ).result()
        await rp.continue_run(ContinueRun(run_id=agent_run.run_id, member_run_id=mine.run_id))


async def test_a_forked_team_session_keeps_its_member_runs(open_runpoint: OpenRunpoint) -> None:
    rp = await open_runpoint(demo.agents)
    source = await team_run(rp, "Paris")
    forked = await rp.fork_session(ForkSession(session_id=source.session_id))
    [copy] = await rp.list_runs(forked.session_id)
    copies = await members_by_agent(rp, copy)
    originals = await members_by_agent(rp, source)
    assert sorted(copies) == ["planner-agent", "travel-agent"]
    for agent_id, member in copies.items():
        original = originals[agent_id]
        assert member.run_id == member_run_id(copy.run_id, original.parent_tool_call_id or "")
        assert (member.session_id, member.forked_from_run_id) == (
            forked.session_id,
            original.run_id,
        )
        assert (await rp.get_run(member.run_id)).run.content == original.content
    tree = await run_trees.timeline(rp.storage, copy)
    [(_, under), _] = tree.checkpoints
    assert {m.member.run.run_id for m in under} == {m.run_id for m in copies.values()}
    # and a member of the copy is continued from, through the copy
    planner = copies["planner-agent"]
    run = await from_member(rp, copy, planner, continue_from=3)
    assert run.session_id == forked.session_id


RELEASE: list[asyncio.Event] = []


@tool(effect="read")
async def wait_at(city: str) -> str:
    """Wait until the test lets it go.

    Args:
        city: The city.
    """
    await RELEASE[0].wait()
    return f"{city}: reached"


async def test_a_member_under_way_is_in_the_timeline_and_not_yet_continued_from(
    open_runpoint: OpenRunpoint,
) -> None:
    RELEASE[:] = [asyncio.Event()]
    rp = await open_runpoint(
        [
            Agent(id="walker", model="scripted:demo", tools=[wait_at]),
            Crew(id="walkers", model="scripted:lead", members=["walker"]),
        ]
    )
    handle = await rp.create_run(CreateRun(agent_id="walkers", message="Paris"))
    run = handle.run
    for _ in range(500):  # until the member's run is under way
        if members := await rp.storage.member_runs(run.run_id):
            break
        await asyncio.sleep(0.01)
    [member] = members
    tree = await run_trees.timeline(rp.storage, await rp.queries.run(run.run_id))
    assert [m.member.run.run_id for m in tree.pending] == [member.run_id]
    assert tree.pending[0].member.call_index is None  # the leader's turn is not written yet
    with pytest.raises(Conflict, match="under way"):
        await rp.continue_run(
            ContinueRun(run_id=run.run_id, agent_id="walkers", member_run_id=member.run_id)
        )
    RELEASE[0].set()
    done = await handle.result()
    assert done.status is RunStatus.COMPLETED, done.error
    tree = await run_trees.timeline(rp.storage, done)
    assert tree.pending == []
    assert [m.member.run.run_id for _, under in tree.checkpoints[:1] for m in under] == [
        member.run_id
    ]


async def test_a_team_session_rolled_back_keeps_its_member_runs(
    open_runpoint: OpenRunpoint,
) -> None:
    rp = await open_runpoint(demo.agents)
    source = await team_run(rp, "Paris")
    checkpoint = await rp.session_checkpoints.create(source.session_id)
    await team_run_in(rp, source.session_id, "Kyoto")  # undone by the rollback
    await rp.session_checkpoints.rollback(source.session_id, checkpoint.checkpoint_id)
    [copy] = await rp.list_runs(source.session_id)
    assert copy.forked_from_run_id == source.run_id
    copies = await members_by_agent(rp, copy)
    originals = await members_by_agent(rp, source)
    assert {a: m.forked_from_run_id for a, m in copies.items()} == {
        a: m.run_id for a, m in originals.items()
    }
    await from_member(rp, copy, copies["planner-agent"], continue_from=3)


async def team_run_in(rp: Runpoint, session_id: str, message: str) -> Run:
    request = CreateRun(agent_id="travel-team", message=message, session_id=session_id)
    return await (await rp.create_run(request)).result()
