"""AgentOS's /teams routes over the real app: the demo team's runs with their members'
runs nested, Team* events, and AgentOS's 404 for what is not a team."""

from __future__ import annotations

from tests.http.sse import parse
from tests.http.test_bad_input import Client, assert_error


async def test_a_team_run_reads_back_with_its_members(client: Client) -> None:
    created = await client.post(
        "/teams/travel-team/runs", data={"message": "Lagos", "stream": "false"}
    )
    run = created.json()
    assert (run["team_id"], run["team_name"], run["status"]) == (
        "travel-team",
        "Travel Team",
        "COMPLETED",
    )
    params = {"session_id": run["session_id"]}
    got = (await client.get(f"/teams/travel-team/runs/{run['run_id']}", params=params)).json()
    members = {m["agent_id"]: m for m in got["member_responses"]}
    assert sorted(members) == ["planner-agent", "travel-agent"]
    assert (
        members["planner-agent"]["content"] == "Here is what I found. Lagos: Lagos is in the plan.."
    )
    assert [m["role"] for m in members["travel-agent"]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    listed = (await client.get("/teams/travel-team/runs", params=params)).json()
    assert [r["run_id"] for r in listed] == [run["run_id"]]  # members are not listed
    timeline = await client.get(
        f"/teams/travel-team/runs/{run['run_id']}/checkpoints", params=params
    )
    assert [c["message_index"] for c in timeline.json()["checkpoints"]] == [4, 5]


async def test_a_team_run_streams_team_events(client: Client) -> None:
    response = await client.post("/teams/travel-team/runs", data={"message": "Tokyo"})
    events = parse(response.text)
    names = [e.name for e in events]
    # the team run's own (its members' are tested in test_team_streams.py)
    assert all(e.data["team_id"] == "travel-team" for e in events if e.name.startswith("Team"))
    assert names[0] == "TeamRunStarted" and names[-1] == "TeamRunCompleted"
    assert names.count("TeamToolCallStarted") == 2  # a delegation to each member


async def test_what_is_not_a_team_is_a_404(client: Client) -> None:
    for path in ("/teams/nobody", "/teams/travel-agent", "/teams/nobody/runs?session_id=s"):
        team = path.split("/")[2]
        assert_error(await client.get(path), 404, "NOT_FOUND", f"team {team} not found")
    assert_error(
        await client.get("/agents/travel-team"), 404, "NOT_FOUND", "agent travel-team not found"
    )
