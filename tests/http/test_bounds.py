"""Bounds: the longest input the contract and the authentication accept is stored on both
databases (PostgreSQL enforces a column's length, SQLite does not), and one character more
is refused with its 4xx before anything is written; so is a U+0000 (NUL), which
PostgreSQL's text cannot hold, while one in what a run makes is kept."""

from __future__ import annotations

import functools
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import jwt
import pytest
from litestar.testing import AsyncTestClient

from runpoint.adapters import auth
from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.adapters.litestar.spec import document
from runpoint.core.types import ToolCall
from runpoint.plugins.demo import agents
from runpoint.plugins.scripted import ScriptedModel
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import MAX_TOOL_CALL_ID_LENGTH, ModelRequest, ModelResponse

from .conftest import bearer

Client = AsyncTestClient[RunpointApp]
SECRET = "a-shared-secret-of-at-least-32-bytes!"
RUNS = "/agents/travel-agent/runs"
SESSION = "s" * 128  # the contract's Id: at most 128 characters


def team_token(team: str) -> dict[str, str]:
    # made when the module is collected, and a busy suite may reach its tests much later
    return bearer(jwt.encode({"team": team, "exp": int(time.time()) + 86400}, SECRET, "HS256"))


LONGEST_TEAM = team_token("t" * auth.MAX_TEAM_LENGTH)


@tool
def book(city: str) -> str:
    """Book a trip (a side effect: its call is recorded before it runs)."""
    return f"Booked {city}."


def booking_turn(request: ModelRequest) -> ModelResponse:
    """Book, naming the call with an id as long as the user's message says."""
    if request.messages[-1].role == "tool":
        return ModelResponse(content="Booked.")
    length = int(request.messages[-1].content or "")
    # distinct four-byte characters: the largest index entry an id of this length makes
    call_id = "".join(chr(0x1F300 + i) for i in range(length))
    return ModelResponse(tool_calls=[ToolCall(call_id, "book", {"city": "Lima"})])


NUL = "Paris\x00"


@tool
def say_nul() -> str:
    """Answer with a NUL in the text."""
    return NUL


def nul_turn(request: ModelRequest) -> ModelResponse:
    if request.messages[-1].role == "tool":
        return ModelResponse(content=f"said {request.messages[-1].content}")
    return ModelResponse(tool_calls=[ToolCall("say", "say_nul", {})])


@pytest.fixture
async def client(database: str) -> AsyncIterator[Client]:
    booker = Agent("booker", ScriptedModel(booking_turn), tools=[book])
    nul = Agent("nul", ScriptedModel(nul_turn), tools=[say_nul])
    app = create_app([*agents, booker, nul], database=database, auth=auth.load(jwt_secret=SECRET))
    async with AsyncTestClient(app) as client:
        client.headers.update(LONGEST_TEAM)
        yield client


async def test_the_longest_legal_inputs_are_kept(client: Client) -> None:
    key = {"Idempotency-Key": "k" * 200}
    body = {"message": "Paris", "stream": "false", "session_id": SESSION, "user_id": "u" * 200}
    created = await client.post(RUNS, data=body, headers=key)
    assert created.status_code == 200, created.text
    run = created.json()
    assert (run["session_id"], run["user_id"], run["status"]) == (SESSION, "u" * 200, "COMPLETED")
    assert (await client.post(RUNS, data=body, headers=key)).json()["run_id"] == run["run_id"]

    continued = await client.post(
        f"{RUNS}/{run['run_id']}/continue",
        data={"session_id": SESSION, "input": "Tokyo", "stream": "false"},
        headers=key,
    )
    assert continued.status_code == 200, continued.text
    forked = await client.post(f"/agents/travel-agent/sessions/{SESSION}/fork", headers=key)
    assert forked.json()["forked_from_session_id"] == SESSION

    captured = await client.post(
        f"/v2/agents/sessions/{SESSION}/checkpoints", json={"label": "l" * 200}
    )
    assert captured.status_code == 201, captured.text
    checkpoint = captured.json()["checkpoint"]
    assert checkpoint["label"] == "l" * 200
    fork = await client.post(
        f"/v2/agents/sessions/{SESSION}/fork",
        json={"from_checkpoint_id": checkpoint["checkpoint_id"]},
    )
    assert fork.status_code == 200, fork.text
    assert fork.json()["sessions"][0]["forked_from_session_id"] == SESSION
    listed = await client.get(f"/v2/agents/sessions/{SESSION}/checkpoints")
    assert listed.status_code == 200, listed.text
    assert [c["checkpoint_id"] for c in listed.json()["checkpoints"]] == [
        checkpoint["checkpoint_id"]
    ]
    # the longest token is legal text, but one we never gave (tokens are opaque): a 400
    made_up = await client.get(
        f"/v2/agents/sessions/{SESSION}/checkpoints", params={"page_token": "f" * 64}
    )
    assert made_up.status_code == 400, made_up.text


@pytest.mark.parametrize("length", [MAX_TOOL_CALL_ID_LENGTH, MAX_TOOL_CALL_ID_LENGTH + 1])
async def test_a_model_may_name_a_tool_call_with_an_id_of_512_characters(
    client: Client, length: int
) -> None:
    booked = await client.post("/agents/booker/runs", data={"message": length, "stream": "false"})
    assert booked.status_code == 200, booked.text
    run = booked.json()
    if length <= MAX_TOOL_CALL_ID_LENGTH:  # recorded before it ran, then run
        assert run["status"] == "COMPLETED", run["error"]
        assert [len(t["tool_call_id"]) for t in run["tools"]] == [length]
    else:  # as any failure of the model: the run ends ERROR, nothing of the turn kept
        assert run["status"] == "ERROR"
        assert run["error"] == (
            "ValueError: model scripted named a tool call with an id of 513 characters "
            "(at most 512)"
        )
        assert run["tools"] == []


async def test_the_longest_ids_that_name_nothing_are_a_404(client: Client) -> None:
    longest = "i" * 128
    for response in [
        # the key's scope holds the team and both ids
        await client.post(
            f"/agents/{longest}/runs/{longest}/continue",
            data={"session_id": longest},
            headers={"Idempotency-Key": "k" * 200},
        ),
        await client.get(f"{RUNS}/{longest}", params={"session_id": longest}),
        await client.get(f"/v2/agents/sessions/{longest}/checkpoints/{longest}"),
    ]:
        assert response.status_code == 404, response.text


OVER = "o" * 129  # one character over an Id
PARIS = {"message": "Paris"}


@pytest.mark.parametrize(
    ("method", "path", "request_", "status"),
    [
        ("POST", RUNS, {"data": {"message": "Paris", "session_id": OVER}}, 422),
        ("POST", RUNS, {"data": {"message": "Paris", "user_id": "u" * 201}}, 422),
        ("POST", RUNS, {"data": PARIS, "headers": {"Idempotency-Key": "k" * 201}}, 422),
        ("POST", RUNS, {"data": PARIS, "headers": team_token("t" * 201)}, 401),
        ("POST", f"/agents/{OVER}/runs", {"data": PARIS}, 422),
        ("POST", f"{RUNS}/r/continue", {"data": {"session_id": OVER}}, 422),
        ("POST", f"{RUNS}/r/continue", {"data": {"session_id": "s", "model": "m" * 201}}, 422),
        ("POST", f"/v2/agents/sessions/{OVER}/checkpoints", {"json": {}}, 422),
        ("POST", "/v2/agents/sessions/s/checkpoints", {"json": {"label": "l" * 201}}, 422),
        ("POST", "/v2/agents/sessions/s/fork", {"json": {"from_checkpoint_id": OVER}}, 422),
        ("GET", "/v2/agents/sessions/s/checkpoints", {"params": {"page_token": "f" * 65}}, 422),
    ],
    ids=["session_id", "user_id", "Idempotency-Key", "team", "agent_id", "continue session_id",
         "model", "v2 session_id", "label", "from_checkpoint_id", "page_token"],
)  # fmt: skip
async def test_one_character_over_a_bound_is_refused(
    client: Client, method: str, path: str, request_: dict[str, Any], status: int
) -> None:
    response = await client.request(method, path, **request_)
    assert response.status_code == status, response.text
    assert (await client.get("/sessions")).json()["data"] == []  # nothing was written


# a decision's result as form fields carry it: JSON text, in which a NUL is an escape
TOOLS_TEXT = '[{"tool_call_id": "c", "result": "Paris\\u0000"}]'


@pytest.mark.parametrize(
    ("method", "path", "request_", "where"),
    [
        ("POST", RUNS, {"json": {"message": NUL}}, "message"),
        ("POST", RUNS, {"data": {"message": NUL}}, "message"),
        ("POST", RUNS, {"data": {"message": "\x00"}}, "message"),
        ("POST", RUNS, {"data": {"message": "Paris", "user_id": NUL}}, "user_id"),
        ("POST", RUNS, {"data": PARIS, "headers": {"Idempotency-Key": NUL}}, "idempotency_key"),
        ("POST", f"{RUNS}/r/continue", {"data": {"session_id": "s", "input": NUL}}, "input"),
        ("POST", f"{RUNS}/r/continue", {"json": {"session_id": "s", "model": NUL}}, "model"),
        ("POST", f"{RUNS}/r/continue", {"json": {"session_id": "s", "continue_from": NUL}},
         "continue_from"),
        ("POST", f"{RUNS}/r/continue", {"data": {"session_id": "s", "tools": TOOLS_TEXT}},
         "tools[0]"),
        ("POST", f"{RUNS}/r/continue",
         {"json": {"session_id": "s", "tools": [{"tool_call_id": "c", "result": NUL}]}},
         "tools[0].result"),
        ("POST", f"{RUNS}/r/continue",
         {"json": {"session_id": "s", "tools": [{"tool_call_id": NUL, "confirmed": True}]}},
         "tools[0].tool_call_id"),
        ("POST", "/v2/agents/sessions/s/checkpoints", {"json": {"label": NUL}}, "label"),
        ("GET", "/v2/agents/sessions/s/checkpoints", {"params": {"page_token": "f\x00"}},
         "page_token"),
    ],
    ids=["message (JSON)", "message (form)", "message (a NUL only)", "user_id", "Idempotency-Key",
         "input", "model",
         "continue_from", "tools (text)", "tools result", "tools tool_call_id", "label",
         "page_token"],
)  # fmt: skip
async def test_a_nul_in_any_text_is_refused(
    client: Client, method: str, path: str, request_: dict[str, Any], where: str
) -> None:
    response = await client.request(method, path, **request_)
    assert response.status_code == 422, response.text
    error = response.json()
    assert error.get("detail", error.get("message")) == f"{where} must not contain U+0000 (NUL)"
    assert (await client.get("/sessions")).json()["data"] == []  # nothing was written


def test_every_text_a_request_carries_refuses_nul() -> None:
    """The document says it for each string (the test above tries today's), a new one too."""
    doc = document()

    def deref(node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            node = functools.reduce(dict.__getitem__, node["$ref"][2:].split("/"), doc)
        return node

    def strings(schema: dict[str, Any], where: str) -> Iterator[tuple[str, dict[str, Any]]]:
        schema = deref(schema)
        kinds = schema.get("type", [])
        if "string" in kinds and not {"enum", "const"} & schema.keys():
            yield where, schema
        for option in schema.get("anyOf", []):
            yield from strings(option, where)
        if "items" in schema:
            yield from strings(schema["items"], f"{where}[]")
        for name, field in schema.get("properties", {}).items():
            yield from strings(field, f"{where}.{name}")

    found: dict[str, dict[str, Any]] = {}
    for path, item in doc["paths"].items():
        for method, op in item.items():
            where = f"{method} {path}"
            for parameter in map(deref, op.get("parameters", [])):
                found |= dict(strings(parameter["schema"], f"{where} {parameter['name']}"))
            for content in deref(op.get("requestBody", {})).get("content", {}).values():
                found |= dict(strings(content["schema"], f"{where} body"))
    assert len(found) > 20
    for where, schema in found.items():
        pattern = schema.get("pattern", "")
        assert re.search(pattern, "Paris") and not re.search(pattern, NUL), where


@pytest.mark.parametrize("team", ["t\x00", "t\n", "t\x7f", "t\x9f"])
async def test_a_team_with_a_control_character_is_refused(client: Client, team: str) -> None:
    response = await client.post(RUNS, data=PARIS, headers=team_token(team))
    assert response.status_code == 401, response.text
    assert response.json()["detail"] == "invalid token: its team has a control character"
    assert (await client.get("/sessions")).json()["data"] == []


async def test_what_a_run_makes_with_a_nul_reads_back_as_it_was(client: Client) -> None:
    # not a NUL: JSON's escape of one, as text (a backslash, then u0000)
    escape = "Paris \\u0000"
    created = await client.post(RUNS, json={"message": escape, "stream": False})
    assert created.status_code == 200, created.text
    assert created.json()["run_input"] == escape

    made = await client.post("/agents/nul/runs", json={"message": "go", "stream": False})
    assert made.status_code == 200, made.text
    run = made.json()
    assert (run["status"], run["content"]) == ("COMPLETED", f"said {NUL}")
    assert [t["result"] for t in run["tools"]] == [NUL]
    read = await client.get(f"/agents/nul/runs/{run['run_id']}?session_id={run['session_id']}")
    assert read.json() == run
