"""A team of agents (a crew) runs as a tree: the leader's run, and a run of each member
its delegation calls started, linked to it and to the call."""

from __future__ import annotations

import pytest

from runpoint.core.types import RunStatus
from runpoint.facade import CreateRun
from runpoint.plugins import demo
from runpoint.seams.agent import Agent
from runpoint.seams.crew import MEMBER, Crew, check_crews, member_run_id
from tests.conftest import OpenRunpoint


async def test_a_team_run_delegates_to_its_members_each_a_run_of_its_own(
    open_runpoint: OpenRunpoint,
) -> None:
    rp = await open_runpoint(demo.agents)
    demo.VISITS.clear()
    handle = await rp.create_run(CreateRun(agent_id="travel-team", message="Paris and Kyoto"))
    run = await handle.result()
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.content == (
        "The team says: travel-agent: Here is what I found. Paris: 2.1M; Kyoto: 1.5M.; "
        "planner-agent: Here is what I found. Paris: Paris is in the plan.; "
        "Kyoto: Kyoto is in the plan.."
    )
    assert demo.VISITS == ["Paris", "Kyoto"]  # the side effect, once each

    detail = await rp.get_run(run.run_id)
    calls = [c for m in detail.messages if m.role == "assistant" for c in m.tool_calls or ()]
    assert [c.arguments["member_id"] for c in calls] == ["travel-agent", "planner-agent"]
    # begun together: in the order of their calls (their rows' order may differ)
    members = sorted(
        await rp.storage.member_runs(run.run_id), key=lambda m: m.agent_id != "travel-agent"
    )
    assert [(m.agent_id, m.parent_run_id, m.parent_tool_call_id) for m in members] == [
        ("travel-agent", run.run_id, calls[0].id),
        ("planner-agent", run.run_id, calls[1].id),
    ]
    for member, call in zip(members, calls, strict=True):
        assert member.run_id == member_run_id(run.run_id, call.id)
        assert member.status is RunStatus.COMPLETED
        assert member.input == "Paris and Kyoto"
        assert member.usage.input_tokens > 0
        _, timeline = await rp.timeline(member.run_id)
        # its own checkpoints: after each of its two tool batches, and its end
        assert [(c.message_index, c.reason) for c in timeline] == [
            (3, "checkpoint"),
            (5, "checkpoint"),
            (6, "end"),
        ]
    # the leader's checkpoint after the delegation closes the members' answers
    _, timeline = await rp.timeline(run.run_id)
    assert [(c.message_index, c.reason) for c in timeline] == [(4, "checkpoint"), (5, "end")]
    snapshot = await rp.snapshot(run.run_id, 4)
    assert [m.content for m in snapshot.detail.messages[2:4]] == [
        members[0].content,
        members[1].content,
    ]
    # members are the team run's, not its session's history
    assert [r.run_id for r in await rp.list_runs(run.session_id)] == [run.run_id]


@pytest.mark.parametrize("relayed", [True, False])
async def test_a_team_runs_log_holds_its_members_events_if_it_streams_them(
    open_runpoint: OpenRunpoint, relayed: bool
) -> None:
    crew = Crew(
        id="crew", model="scripted:lead", members=["travel-agent"], stream_member_events=relayed
    )
    rp = await open_runpoint([demo.agents[0], crew])
    run = await (await rp.create_run(CreateRun(agent_id="crew", message="Paris"))).result()
    (member,) = await rp.storage.member_runs(run.run_id)
    own = await rp.storage.read_events(member, 0, 1_000)
    assert [e.event for e in own][:: len(own) - 1] == ["RunStarted", "RunCompleted"]
    logged = await rp.storage.read_events(run, 0, 1_000)
    assert [e.seq for e in logged] == list(range(1, len(logged) + 1))
    # each of the member's stored events once, in its order, told by its member and run
    told = {"agent_id": "travel-agent", "run_id": member.run_id}
    expected = [(e.event, e.data | {MEMBER: told | {"seq": e.seq}}) for e in own]
    expected = expected if relayed else []
    assert [(e.event, e.data) for e in logged if MEMBER in e.data] == expected
    assert [e.event for e in logged if MEMBER not in e.data][-1] == "RunCompleted"


@pytest.mark.parametrize(
    ("agents", "said"),
    [
        ([Crew(id="t", model="scripted:lead", members=["nobody"])], "member 'nobody' is not"),
        (
            [
                Agent(id="a", model="scripted:demo"),
                Crew(id="a", model="scripted:lead", members=["a"]),
            ],
            "team id 'a' is taken",
        ),
        (
            [
                Crew(id="t", model="scripted:lead", members=["a"]),
                Crew(id="u", model="scripted:lead", members=["t"]),
            ],
            "member 'a' is not an agent",
        ),
    ],
)
def test_a_team_whose_members_cannot_be_found_fails_at_start(
    agents: list[Agent], said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        check_crews(agents)


def test_a_team_naming_a_member_twice_fails_as_it_is_made() -> None:
    with pytest.raises(ValueError, match="team 't' names member 'a' twice"):
        Crew(id="t", model="scripted:lead", members=["a", "a"])
