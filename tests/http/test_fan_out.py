"""Fan-out over HTTP: one request forks up to 8 runs at a boundary, answers their ids at
once (202), all or nothing, and a retry with the same Idempotency-Key gets the same runs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.http import sse
from tests.http.test_bad_input import assert_error
from tests.http.test_edit_and_fork import RUNS, completed

pytestmark = pytest.mark.memory  # storage is not the subject here

Client = AsyncTestClient[Litestar]


async def finished(client: Client, run: dict[str, Any]) -> dict[str, Any]:
    query = {"session_id": run["session_id"]}
    for _ in range(200):
        body: dict[str, Any] = (await client.get(f"{RUNS}/{run['run_id']}", params=query)).json()
        if body["status"] not in ("PENDING", "RUNNING"):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run['run_id']} did not finish")


async def test_branches_with_their_own_inputs_edits_and_models(client: Client) -> None:
    source = await completed(client)
    branches = [
        {"input": "And Lagos?"},
        {"edits": [{"kind": "user_message", "content": "Kyoto"}], "input": "Thanks"},
        {"input": "Say this back", "model": "scripted:echo"},
    ]
    url = f"{RUNS}/{source['run_id']}/fan-out"
    fields = {"session_id": source["session_id"], "continue_from": 3, "branches": branches}
    response = await client.post(url, json=fields)
    assert response.status_code == 202, response.text
    accepted = response.json()["runs"]
    assert [a["status"] for a in accepted] == ["RUNNING"] * 3
    runs = [await finished(client, a) for a in accepted]
    assert [r["status"] for r in runs] == ["COMPLETED"] * 3
    assert {(r["forked_from_run_id"], r["forked_from_message_index"]) for r in runs} == {
        (source["run_id"], 3)
    }
    assert "Lagos" in runs[0]["content"]
    assert runs[1]["edits"][0]["kind"] == "user_message"
    assert runs[2]["content"] == "Say this back"


async def test_all_or_nothing_and_bounded(client: Client) -> None:
    source = await completed(client)
    url = f"{RUNS}/{source['run_id']}/fan-out"
    session = {"session_id": source["session_id"]}
    bad_model = [{"input": "ok"}, {"input": "x", "model": "nope:model"}]
    response = await client.post(url, json=session | {"branches": bad_model})
    assert response.status_code == 400 and response.json()["error_code"] == "BAD_REQUEST"
    nine = [{"input": str(i)} for i in range(9)]
    response = await client.post(url, json=session | {"branches": nine})
    assert response.status_code == 422, response.text
    blank = [{"input": "ok"}, {"input": " "}]
    response = await client.post(url, json=session | {"branches": blank})
    assert_error(response, 400, "BAD_REQUEST", "input must not be empty")
    bad_edit = [{"edits": [{"kind": "tool_result", "content": "1"}]}]
    response = await client.post(url, json=session | {"branches": bad_edit})
    assert_error(response, 400, "BAD_REQUEST", "edits[0].tool_call_id is required")
    listed = await client.get(f"/sessions/{source['session_id']}/runs")
    assert len(listed.json()) == 1


async def test_a_retry_with_the_same_key_gets_the_same_runs(client: Client) -> None:
    source = await completed(client)
    url = f"{RUNS}/{source['run_id']}/fan-out"
    body = {"session_id": source["session_id"], "branches": [{"input": "A"}, {"input": "B"}]}
    headers = {"Idempotency-Key": "fan-1"}
    first = (await client.post(url, json=body, headers=headers)).json()["runs"]
    again = await client.post(url, json=body, headers=headers)
    assert again.status_code == 202
    assert [r["run_id"] for r in again.json()["runs"]] == [r["run_id"] for r in first]
    for run in first:
        await finished(client, run)
    listed = await client.get(f"/sessions/{source['session_id']}/runs")
    assert len(listed.json()) == 3


async def test_each_branch_and_an_edited_fork_keep_their_events_to_join(client: Client) -> None:
    """The runs a fan-out (or an edit) makes write their event logs as any run does: a
    branch's stream is joined through /events, from its start to its end."""
    source = await completed(client)
    paris = source["tools"][0]["tool_call_id"]
    edits = [{"kind": "tool_result", "tool_call_id": paris, "content": "99M"}]
    url = f"{RUNS}/{source['run_id']}/fan-out"
    body = {"session_id": source["session_id"], "continue_from": 3}
    branches = [{"input": "And Lagos?"}, {"edits": edits}]
    accepted = (await client.post(url, json=body | {"branches": branches})).json()["runs"]
    for run in accepted:
        events_url = f"{RUNS}/{run['run_id']}/events"
        query = {"session_id": run["session_id"], "events": "all"}
        response = await client.get(events_url, params=query)
        assert response.status_code == 200, response.text
        events = sse.parse(response.text)
        names = [e.name for e in events]
        assert names[0] == "RunContinued" and names[-1] == "RunCompleted", names
        assert [e.id for e in events] == list(range(1, len(events) + 1))
        assert {e.data["run_id"] for e in events} == {run["run_id"]}
    ended = [await finished(client, run) for run in accepted]
    assert "99M" in ended[1]["content"]
