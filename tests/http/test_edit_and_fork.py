"""Edit and fork over HTTP: `edits` on /continue (a JSON array, or its JSON text in a
form) make a new run whose lineage, timeline and snapshots show the edited messages as
such; bad edits are refused before anything starts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.http.test_bad_input import assert_error

pytestmark = pytest.mark.memory  # storage is not the subject here

Client = AsyncTestClient[Litestar]
RUNS = "/agents/travel-agent/runs"


async def completed(client: Client) -> dict[str, Any]:
    """Paris, then Tokyo, looked up in a batch each, then the answer (checkpoints at 3, 5
    and 6)."""
    response = await client.post(RUNS, data={"message": "Paris and Tokyo", "stream": "false"})
    run: dict[str, Any] = response.json()
    assert run["status"] == "COMPLETED" and run["message_count"] == 6
    return run


async def continued(client: Client, run: dict[str, Any], **fields: Any) -> Any:
    body = {"session_id": run["session_id"], "stream": False} | fields
    return await client.post(f"{RUNS}/{run['run_id']}/continue", json=body)


@pytest.mark.parametrize("how", ["json", "form"])
async def test_a_result_edited_at_a_checkpoint_makes_a_fork_that_says_so(
    client: Client, how: str
) -> None:
    source = await completed(client)
    paris = source["tools"][0]
    edits = [{"kind": "tool_result", "tool_call_id": paris["tool_call_id"], "content": "99M"}]
    if how == "json":
        response = await continued(client, source, continue_from=3, edits=edits)
    else:
        form = {"session_id": source["session_id"], "stream": "false", "continue_from": "3"}
        response = await client.post(
            f"{RUNS}/{source['run_id']}/continue", data=form | {"edits": json.dumps(edits)}
        )
    assert response.status_code == 200, response.text
    fork = response.json()
    assert fork["run_id"] != source["run_id"]
    assert (fork["forked_from_run_id"], fork["forked_from_message_index"]) == (
        source["run_id"],
        3,
    )
    assert fork["content"] == "Here is what I found. Paris: 99M; Tokyo: 13.9M."
    [lineage] = fork["edits"]
    edited = fork["messages"][2]
    assert lineage["kind"] == "tool_result" and lineage["message_index"] == 2
    assert lineage["replaced_message_id"] == source["messages"][2]["id"]
    assert lineage["message_id"] == edited["id"] and lineage["user_id"] is None
    assert (edited["content"], edited["replaces"]) == ("99M", source["messages"][2]["id"])
    assert "replaces" not in fork["messages"][1]

    query = {"session_id": source["session_id"]}
    timeline = await client.get(f"{RUNS}/{fork['run_id']}/checkpoints", params=query)
    assert timeline.json()["edits"] == fork["edits"]
    snapshot = (await client.get(f"{RUNS}/{fork['run_id']}/checkpoints/3", params=query)).json()
    assert snapshot["snapshot"]["messages"][2]["replaces"] == source["messages"][2]["id"]
    assert snapshot["snapshot"]["edits"] == fork["edits"]
    before = (await client.get(f"{RUNS}/{fork['run_id']}/checkpoints/2", params=query)).json()
    assert before["snapshot"]["edits"] == []  # the edit lies past that boundary

    # the source is as it was
    again = await client.get(f"{RUNS}/{source['run_id']}", params=query)
    assert again.json()["messages"] == source["messages"]
    assert again.json()["edits"] == []


async def test_bad_edits_are_refused(client: Client) -> None:
    source = await completed(client)
    paris = source["tools"][0]["tool_call_id"]
    cases: list[tuple[Any, int, str, str]] = [
        (
            [{"kind": "tool_result", "tool_call_id": paris}],
            400,
            "BAD_REQUEST",
            "edits[0].content is required",
        ),
        ("[{", 400, "BAD_REQUEST", "edits is not valid JSON"),
        ('[{"kind": "nope"}]', 400, "BAD_REQUEST", "edits[0].kind: Invalid value 'nope'"),
        (
            [{"kind": "tool_arguments", "tool_call_id": paris, "arguments": {"city": ["x"]}}],
            422,
            "VALIDATION_ERROR",
            f"the arguments for tool call {paris} do not fit get_population's schema: "
            "arguments.city: Expected `str`, got `array`",
        ),
        (
            [{"kind": "tool_result", "tool_call_id": "call_x", "content": "1"}],
            400,
            "BAD_REQUEST",
            "the run has no result of tool call call_x before message 3",
        ),
        (
            '[{"kind": "user_message", "content": "a\\u0000"}]',
            422,
            "VALIDATION_ERROR",
            "edits must not contain U+0000 (NUL)",
        ),
    ]
    for edits, status, code, detail in cases:
        response = await continued(client, source, continue_from=3, edits=edits)
        assert_error(response, status, code, detail)
    listed = await client.get(f"/sessions/{source['session_id']}/runs")
    assert len(listed.json()) == 1  # nothing was started


async def test_the_diff_of_an_edited_fork_and_its_source(client: Client) -> None:
    source = await completed(client)
    paris = source["tools"][0]
    edits = [{"kind": "tool_result", "tool_call_id": paris["tool_call_id"], "content": "99M"}]
    fork = (await continued(client, source, continue_from=3, edits=edits)).json()
    query = {"session_id": source["session_id"], "other_run_id": fork["run_id"]}
    response = await client.get(f"{RUNS}/{source['run_id']}/diff", params=query)
    assert response.status_code == 200, response.text
    diff = response.json()
    assert diff["common_message_index"] == 2
    assert (diff["base"]["run_id"], diff["other"]["run_id"]) == (source["run_id"], fork["run_id"])
    assert (diff["base"]["status"], diff["other"]["status"]) == ("COMPLETED", "COMPLETED")
    assert diff["base"]["message_index"] == diff["base"]["requested_message_index"] == 6
    [edited] = diff["messages"]["edited"]
    assert edited["base"]["message"]["content"] == "2.1M"
    assert edited["other"]["message"]["replaces"] == edited["base"]["message"]["id"]
    assert [m["message_index"] for m in diff["messages"]["added"]] == [3, 4, 5]
    [changed] = diff["tools"]["changed"]
    assert (changed["base"]["result"], changed["other"]["result"]) == ("2.1M", "99M")

    one_run = {"session_id": source["session_id"], "message_index": 3}
    response = await client.get(f"{RUNS}/{source['run_id']}/diff", params=one_run)
    assert [m["message_index"] for m in response.json()["messages"]["added"]] == [3, 4, 5]

    bad = {"session_id": source["session_id"], "other_message_index": 99}
    response = await client.get(f"{RUNS}/{source['run_id']}/diff", params=bad)
    assert_error(
        response,
        400,
        "INVALID_BOUNDARY",
        f"message_index 99 is outside run {source['run_id']}'s boundaries 0..6",
    )
