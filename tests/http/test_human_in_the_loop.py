"""A paused tool call over HTTP, in Agno's ToolExecution shape: approve it, approve it with
edited `tool_args`, reject it with a `confirmation_note` the model reads, or give its
result; the run's `tools` then say what was decided, what ran and what the model proposed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.http.test_bad_input import assert_error

pytestmark = pytest.mark.memory  # storage is not the subject here

Client = AsyncTestClient[Litestar]
RUNS = "/agents/booking-agent/runs"


async def paused(client: Client) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run paused on booking Paris, and its paused call as the run lists it."""
    response = await client.post(RUNS, data={"message": "Book Paris", "stream": "false"})
    run = response.json()
    assert run["status"] == "PAUSED"
    [call] = run["tools"]
    return run, call


async def decide(client: Client, run: dict[str, Any], decision: dict[str, Any]) -> Any:
    """Continue the run with one decision, as Agno's client sends it (a form field of JSON
    text holding the ToolExecution dicts)."""
    return await client.post(
        f"{RUNS}/{run['run_id']}/continue",
        data={
            "session_id": run["session_id"],
            "stream": "false",
            "tools": json.dumps([decision]),
        },
    )


async def test_approved_with_edited_tool_args(client: Client) -> None:
    run, call = await paused(client)
    edited = call | {"confirmed": True, "tool_args": {"city": "Lyon"}}
    response = await decide(client, run, edited)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "COMPLETED"
    [tool] = body["tools"]
    assert tool["tool_args"] == {"city": "Lyon"}
    assert tool["proposed_args"] == {"city": "Paris"}
    assert (tool["ruling"], tool["result"]) == ("edited", "Booked a trip to Lyon.")
    [turn] = [m for m in body["messages"] if m.get("tool_calls")]
    assert json.loads(turn["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    [result] = [m for m in body["messages"] if m["role"] == "tool"]
    assert (result["tool_args"], result["ruling"]) == ({"city": "Lyon"}, "edited")


async def test_agnos_unchanged_tool_args_are_a_plain_approval(client: Client) -> None:
    run, call = await paused(client)
    response = await decide(client, run, call | {"confirmed": True})  # tool_args as listed
    [tool] = response.json()["tools"]
    assert (tool["ruling"], tool["proposed_args"]) == ("approved", None)


async def test_an_edit_the_tool_schema_refuses_is_a_422_naming_the_field(client: Client) -> None:
    run, call = await paused(client)
    response = await decide(client, run, call | {"confirmed": True, "tool_args": {"city": 7}})
    detail = (
        f"the arguments for tool call {call['tool_call_id']} do not fit book_trip's schema: "
        "arguments.city: Expected `str`, got `int`"
    )
    assert_error(response, 422, "VALIDATION_ERROR", detail)
    # nothing was accepted
    again = await client.get(f"{RUNS}/{run['run_id']}", params={"session_id": run["session_id"]})
    assert again.json()["status"] == "PAUSED"


async def test_a_nul_inside_edited_tool_args_is_a_422(client: Client) -> None:
    run, call = await paused(client)
    edited = call | {"confirmed": True, "tool_args": {"city": "Ly\x00on"}}
    response = await decide(client, run, edited)
    assert_error(response, 422, "VALIDATION_ERROR", "tools[0] must not contain U+0000 (NUL)")


async def test_rejected_with_a_note_the_model_reads(client: Client) -> None:
    run, call = await paused(client)
    note = "Not this month."
    response = await decide(client, run, call | {"confirmed": False, "confirmation_note": note})
    body = response.json()
    [tool] = body["tools"]
    assert (tool["ruling"], tool["tool_call_error"]) == ("rejected", True)
    assert tool["result"].endswith(note)
    assert note in body["content"]  # the model's answer read the note


async def test_a_result_given_instead_of_running_the_call(client: Client) -> None:
    run, call = await paused(client)
    response = await decide(client, run, call | {"result": "Booked by phone."})
    [tool] = response.json()["tools"]
    assert (tool["ruling"], tool["result"]) == ("answered", "Booked by phone.")
