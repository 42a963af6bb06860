"""AgentOS's /teams routes over the real app: the demo team's runs with their members'
runs nested, Team* events, and AgentOS's 404 for what is not a team."""

from __future__ import annotations

from typing import Any

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
    assert all(e.data["team_id"] == "travel-team" for e in events)
    assert names[0] == "TeamRunStarted" and names[-1] == "TeamRunCompleted"
    assert names.count("TeamToolCallStarted") == 2  # a delegation to each member


async def test_what_is_not_a_team_is_a_404(client: Client) -> None:
    for path in ("/teams/nobody", "/teams/travel-agent", "/teams/nobody/runs?session_id=s"):
        team = path.split("/")[2]
        assert_error(await client.get(path), 404, "NOT_FOUND", f"team {team} not found")
    assert_error(
        await client.get("/agents/travel-team"), 404, "NOT_FOUND", "agent travel-team not found"
    )


async def team_run(client: Client, message: str) -> dict[str, Any]:
    created = await client.post(
        "/teams/travel-team/runs", data={"message": message, "stream": "false"}
    )
    assert created.status_code == 200, created.text
    run: dict[str, Any] = created.json()
    return run


async def tree(client: Client, run: dict[str, Any]) -> dict[str, Any]:
    params = {"session_id": run["session_id"]}
    got = await client.get(f"/teams/travel-team/runs/{run['run_id']}/checkpoints", params=params)
    assert got.status_code == 200, got.text
    timeline: dict[str, Any] = got.json()
    return timeline


async def test_a_team_run_travels_in_time_from_a_members_checkpoint(client: Client) -> None:
    run = await team_run(client, "Paris and Kyoto")
    timeline = await tree(client, run)
    assert [(c["message_index"], c["reason"]) for c in timeline["checkpoints"]] == [
        (4, "checkpoint"),
        (5, "end"),
    ]
    assert timeline["members"] == [] and timeline["checkpoints"][1]["members"] == []
    delegated = timeline["checkpoints"][0]["members"]
    assert [m["agent_id"] for m in delegated] == ["travel-agent", "planner-agent"]
    planner = delegated[1]
    assert planner["parent_run_id"] == run["run_id"] and planner["status"] == "COMPLETED"
    assert [c["message_index"] for c in planner["checkpoints"]] == [3, 5, 6]
    assert planner["checkpoints"][-1]["is_latest"]

    # a member node's snapshot
    base = f"/teams/travel-team/runs/{run['run_id']}"
    params = {"session_id": run["session_id"]}
    node = await client.get(f"{base}/members/{planner['run_id']}/checkpoints/3", params=params)
    assert node.status_code == 200, node.text
    snapshot = node.json()
    assert snapshot["message_index"] == 3 and snapshot["checkpoint"]["message_index"] == 3
    assert snapshot["snapshot"]["agent_id"] == "planner-agent"
    assert [m["role"] for m in snapshot["snapshot"]["messages"]] == ["user", "assistant", "tool"]

    # continue from it: a new team run whose leader answers with the member's new result
    continued = await client.post(
        f"{base}/continue",
        json={
            "session_id": run["session_id"],
            "member_run_id": planner["run_id"],
            "continue_from": 3,
            "input": "Lima too",
            "stream": False,
        },
    )
    assert continued.status_code == 200, continued.text
    new = continued.json()
    assert new["run_id"] != run["run_id"] and new["team_id"] == "travel-team"
    assert new["content"].endswith(
        "planner-agent: Here is what I found. Lima: Lima is in the plan.."
    )
    nested = {m["agent_id"]: m for m in new["member_responses"]}
    # the travel agent's run is inherited (the source's), the planner's its own
    assert list(nested) == ["travel-agent", "planner-agent"]
    assert nested["travel-agent"]["run_id"] == delegated[0]["run_id"]
    assert nested["planner-agent"]["forked_from_run_id"] == planner["run_id"]
    new_tree = await tree(client, new)
    under = new_tree["checkpoints"][0]["members"]
    assert [m["run_id"] for m in under] == [
        delegated[0]["run_id"],
        nested["planner-agent"]["run_id"],
    ]
    assert under[1]["forked_from_run_id"] == planner["run_id"]
    assert under[1]["forked_from_message_index"] == 3

    # diffs at any node: the two planners' runs, the two leaders'
    diff = await client.get(
        f"{base}/diff",
        params=params
        | {
            "member_run_id": planner["run_id"],
            "other_run_id": new["run_id"],
            "other_member_run_id": under[1]["run_id"],
        },
    )
    assert diff.status_code == 200, diff.text
    assert diff.json()["common_message_index"] == 3
    assert diff.json()["messages"]["added"][0]["message"]["content"] == "Lima too"
    leaders = await client.get(f"{base}/diff", params=params | {"other_run_id": new["run_id"]})
    assert leaders.status_code == 200, leaders.text
    assert leaders.json()["common_message_index"] == 2
    mixed = await client.get(
        f"{base}/diff", params=params | {"other_member_run_id": planner["run_id"]}
    )
    assert mixed.status_code == 400, mixed.text


async def test_a_member_run_through_the_wrong_team_run_is_a_404(client: Client) -> None:
    one, other = await team_run(client, "Paris"), await team_run(client, "Kyoto")
    theirs = (await tree(client, other))["checkpoints"][0]["members"][0]["run_id"]
    base = f"/teams/travel-team/runs/{one['run_id']}"
    params = {"session_id": one["session_id"]}
    detail = f"member run {theirs} not found in team run {one['run_id']}"
    assert_error(
        await client.get(f"{base}/members/{theirs}/checkpoints/1", params=params),
        404,
        "NOT_FOUND",
        detail,
    )
    assert_error(
        await client.post(
            f"{base}/continue",
            json={"session_id": one["session_id"], "member_run_id": theirs, "stream": False},
        ),
        404,
        "NOT_FOUND",
        detail,
    )
    assert_error(
        await client.get(f"{base}/members/nobody/checkpoints/1", params=params),
        404,
        "NOT_FOUND",
        f"member run nobody not found in team run {one['run_id']}",
    )
    mine = (await tree(client, one))["checkpoints"][0]["members"][0]["run_id"]
    past = await client.get(f"{base}/members/{mine}/checkpoints/99", params=params)
    assert past.status_code == 400, past.text
    for body in (
        {"continue_from": "bogus"},
        {"continue_from": 99},
        {"tools": [{"tool_call_id": "c", "confirmed": True}]},
        {"input": " "},
    ):
        refused = await client.post(
            f"{base}/continue",
            json={"session_id": one["session_id"], "member_run_id": mine, "stream": False} | body,
        )
        assert refused.status_code in (400, 422), (body, refused.text)


async def test_forks_of_a_team_session_keep_its_member_runs(client: Client) -> None:
    run = await team_run(client, "Paris")
    forked = await client.post(f"/teams/travel-team/sessions/{run['session_id']}/fork")
    assert forked.status_code == 200, forked.text
    v2 = await client.post(f"/v2/agents/sessions/{run['session_id']}/fork", json={})
    assert v2.status_code == 200, v2.text
    for session_id in (forked.json()["session_id"], v2.json()["sessions"][0]["session_id"]):
        [copy] = (
            await client.get("/teams/travel-team/runs", params={"session_id": session_id})
        ).json()
        assert sorted(m["agent_id"] for m in copy["member_responses"]) == [
            "planner-agent",
            "travel-agent",
        ]
        assert all(m["session_id"] == session_id for m in copy["member_responses"])
        [under] = [c["members"] for c in (await tree(client, copy))["checkpoints"][:1]]
        assert {m["run_id"] for m in under} == {m["run_id"] for m in copy["member_responses"]}
