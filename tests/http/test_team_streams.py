"""A team run's stream over the real app: its members' events in it, as AgentOS relays
them (their own names, `agent_id` and `run_id`, the team run's as `parent_run_id`), in
order, under ids of the team run's stream that joining and resuming go by."""

from __future__ import annotations

from typing import Any

from tests.http.sse import Event, parse
from tests.http.test_bad_input import Client, assert_error

MEMBERS = ("travel-agent", "planner-agent")


def said(event: Event) -> dict[str, Any]:
    """What an event says, but for where it is (its ids, its time)."""
    ids = (
        "agent_id",
        "agent_name",
        "team_id",
        "team_name",
        "run_id",
        "parent_run_id",
        "created_at",
    )
    return {k: v for k, v in event.data.items() if k not in ids}


async def team_run(client: Client, message: str, events: str = "agno") -> list[Event]:
    response = await client.post(
        f"/teams/travel-team/runs?events={events}", data={"message": message}
    )
    assert response.status_code == 200, response.text
    return parse(response.text)


async def test_a_team_runs_stream_carries_its_members_events_in_order(client: Client) -> None:
    events = await team_run(client, "Tokyo")
    team_run_id = events[0].data["run_id"]
    ids = [e.id for e in events]
    assert ids == sorted(set(ids))
    own = [e for e in events if "team_id" in e.data]
    assert all(e.name.startswith("Team") for e in own)
    assert {(e.data["team_id"], e.data["team_name"]) for e in own} == {
        ("travel-team", "Travel Team")
    }
    assert not any("agent_id" in e.data or "agent_name" in e.data for e in own)
    assert own[0].name == "TeamRunStarted" and events[-1].name == "TeamRunCompleted"
    delegated = [i for i, e in enumerate(events) if e.name == "TeamToolCallStarted"]
    answered = [i for i, e in enumerate(events) if e.name == "TeamToolCallCompleted"]
    members = [e for e in events if "team_id" not in e.data]
    assert {(e.data["agent_id"], e.data["agent_name"]) for e in members} == {
        ("travel-agent", "Travel Agent"),
        ("planner-agent", "Planner Agent"),
    }
    assert not any("team_id" in e.data or "team_name" in e.data for e in members)
    assert all(e.data["parent_run_id"] == team_run_id for e in members)
    # all of them between the delegations and their answers
    assert all(delegated[-1] < events.index(e) < answered[0] for e in members)
    session = {"session_id": events[0].data["session_id"]}
    for member in MEMBERS:
        mine = [e for e in members if e.data["agent_id"] == member]
        assert [e.name for e in mine][:: len(mine) - 1] == ["RunStarted", "RunCompleted"]
        # the member run's own stream, event for event
        run_id = mine[0].data["run_id"]
        assert {e.data["run_id"] for e in mine} == {run_id}
        response = await client.get(f"/agents/{member}/runs/{run_id}/events", params=session)
        assert [said(e) for e in parse(response.text)] == [said(e) for e in mine]


async def test_a_team_runs_stream_is_joined_and_resumed_by_its_ids(client: Client) -> None:
    events = await team_run(client, "Lagos", events="all")
    run_id, session = events[0].data["run_id"], {"session_id": events[0].data["session_id"]}
    assert {e.data.get("agent_id") for e in events if e.name == "CheckpointCreated"} == {
        None,  # the team run's own
        *MEMBERS,
    }
    path = f"/teams/travel-team/runs/{run_id}"
    whole = await client.get(f"{path}/events", params=session | {"events": "all"})
    assert [e.text for e in parse(whole.text)] == [e.text for e in events]
    # from inside a member's events, by Last-Event-ID and by AgentOS's /resume index
    middle = next(e for e in events if e.data.get("agent_id") == "planner-agent").id
    rest = [e.text for e in events if e.id > middle]
    joined = await client.get(
        f"{path}/events", params=session | {"events": "all"}, headers={"Last-Event-ID": str(middle)}
    )
    assert [e.text for e in parse(joined.text)] == rest
    resumed = await client.post(
        f"{path}/resume?events=all", data={"last_event_index": str(middle - 1)} | session
    )
    assert [e.text for e in parse(resumed.text)] == rest
    # Agno's events only, by default: the members' too
    agno = parse((await client.get(f"{path}/events", params=session)).text)
    assert [e.text for e in agno] == [
        e.text for e in events if e.name not in ("CheckpointCreated", "ToolCallDelta")
    ]


async def test_agent_routes_refuse_a_teams_id_and_team_routes_an_agents(client: Client) -> None:
    events = await team_run(client, "Paris")
    run_id, session = events[0].data["run_id"], events[0].data["session_id"]
    run = f"/agents/travel-team/runs/{run_id}"
    for response in (
        await client.post("/agents/travel-team/runs", data={"message": "Paris"}),
        await client.get("/agents/travel-team/runs", params={"session_id": session}),
        await client.get(run, params={"session_id": session}),
        await client.get(f"{run}/events", params={"session_id": session}),
        await client.post(f"{run}/cancel"),
        await client.post(f"{run}/continue", data={"session_id": session, "fork": "true"}),
        await client.get(f"{run}/checkpoints", params={"session_id": session}),
    ):
        assert_error(response, 404, "NOT_FOUND", "agent travel-team not found")
    agent = f"/teams/travel-agent/runs/{run_id}"
    for response in (
        await client.post("/teams/travel-agent/runs", data={"message": "Paris"}),
        await client.get(f"{agent}/events", params={"session_id": session}),
        await client.post(f"{agent}/cancel"),
    ):
        assert_error(response, 404, "NOT_FOUND", "team travel-agent not found")
