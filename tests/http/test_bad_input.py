"""Bad requests: each is refused with its status and a `detail` that says what is wrong,
before anything starts (no 200 stream holding an error)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from runpoint.adapters.litestar import json_depth

Client = AsyncTestClient[Litestar]
JSON = "application/json"


async def completed_run(client: Client) -> dict[str, Any]:
    response = await client.post(
        "/agents/travel-agent/runs", data={"message": "Paris and Tokyo", "stream": "false"}
    )
    assert response.status_code == 200
    run: dict[str, Any] = response.json()
    return run


def assert_error(response: Any, status: int, error_code: str, detail: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"detail": detail, "error_code": error_code}
    assert response.headers["x-request-id"]


async def test_unknown_agent_run_and_session(client: Client) -> None:
    run = await completed_run(client)
    path, session = f"/agents/travel-agent/runs/{run['run_id']}", run["session_id"]
    for response, detail in [
        (await client.get("/agents/nobody"), "agent nobody not found"),
        (
            await client.post("/agents/nobody/runs", data={"message": "hi"}),
            "agent nobody not found",
        ),
        (
            await client.get("/agents/travel-agent/runs/nope", params={"session_id": session}),
            "run nope not found",
        ),
        (await client.get(path, params={"session_id": "other"}), f"run {run['run_id']} not found"),
        (
            await client.get(
                f"/agents/checkpoint-agent/runs/{run['run_id']}/checkpoints",
                params={"session_id": session},
            ),
            f"run {run['run_id']} not found",
        ),
        (await client.get("/sessions/nope"), "session nope not found"),
        (await client.delete("/sessions/nope"), "session nope not found"),
        (await client.post("/agents/travel-agent/sessions/nope/fork"), "session nope not found"),
    ]:
        assert_error(response, 404, "NOT_FOUND", detail)


async def test_continue_of_an_unknown_run_is_404_even_when_streaming(client: Client) -> None:
    response = await client.post(
        "/agents/travel-agent/runs/nope/continue", data={"session_id": "s", "stream": "true"}
    )
    assert_error(response, 404, "NOT_FOUND", "run nope not found")


@pytest.mark.parametrize(
    ("params", "detail"),
    [({}, "session_id is required"), ({"session_id": ""}, "session_id must not be empty")],
)
async def test_missing_or_empty_session_id(
    client: Client, params: dict[str, str], detail: str
) -> None:
    run = await completed_run(client)
    base = f"/agents/travel-agent/runs/{run['run_id']}"
    for response in [
        await client.get(base, params=params),
        await client.get(f"{base}/checkpoints", params=params),
        await client.get(f"{base}/checkpoints/1", params=params),
        await client.post(f"{base}/continue", data=params | {"input": "Go on"}),
    ]:
        assert_error(response, 422, "VALIDATION_ERROR", detail)


@pytest.mark.parametrize(
    ("index", "status", "code", "detail"),
    [
        ("-1", 400, "INVALID_BOUNDARY", "message_index -1 is outside this run's boundaries 0..6"),
        ("7", 400, "INVALID_BOUNDARY", "message_index 7 is outside this run's boundaries 0..6"),
        ("two", 422, "VALIDATION_ERROR", "message_index: Expected `int`, got `str`"),
        ("1.5", 422, "VALIDATION_ERROR", "message_index: Expected `int`, got `str`"),
    ],
)
async def test_bad_message_index(
    client: Client, index: str, status: int, code: str, detail: str
) -> None:
    run = await completed_run(client)
    response = await client.get(
        f"/agents/travel-agent/runs/{run['run_id']}/checkpoints/{index}",
        params={"session_id": run["session_id"]},
    )
    assert_error(response, status, code, detail)


@pytest.mark.parametrize(
    ("continue_from", "detail"),
    [
        ("7", "continue_from 7 is outside this run's boundaries 0..6"),
        ("-1", "continue_from -1 is outside this run's boundaries 0..6"),
        ("later", "continue_from must be 'end', 'last_user' or a message index, not 'later'"),
        ("", "continue_from must be 'end', 'last_user' or a message index, not ''"),
    ],
)
@pytest.mark.parametrize("stream", ["true", "false"])
async def test_bad_continue_from(
    client: Client, continue_from: str, detail: str, stream: str
) -> None:
    run = await completed_run(client)
    response = await client.post(
        f"/agents/travel-agent/runs/{run['run_id']}/continue",
        data={
            "session_id": run["session_id"],
            "continue_from": continue_from,
            "input": "Go on",
            "stream": stream,
        },
    )
    assert_error(response, 400, "INVALID_BOUNDARY", detail)


async def test_bodies_that_are_not_what_the_document_says(client: Client) -> None:
    runs = "/agents/travel-agent/runs"
    for response, detail in [
        (await client.post(runs, data={"stream": "false"}), "message is required"),
        (
            await client.post(runs, data={"message": "   "}),
            "message must not be blank",
        ),
        (
            await client.post(runs, data={"message": "hi", "stream": "maybe"}),
            "stream: Expected `bool`, got `str`",
        ),
        (await client.post(runs, json={"message": 3}), "message: Expected `str`, got `int`"),
        (await client.post(runs, json=["message"]), "the body must be a JSON object"),
        (
            await client.post(runs, content=b"{", headers={"content-type": "application/json"}),
            "the body is not valid JSON",
        ),
    ]:
        assert_error(response, 422, "VALIDATION_ERROR", detail)
    response = await client.post(runs, content=b"message", headers={"content-type": "text/plain"})
    assert_error(
        response,
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        "send the body as one of application/json, application/x-www-form-urlencoded, "
        "multipart/form-data, not text/plain",
    )


async def test_bad_tool_decisions(client: Client) -> None:
    paused = (
        await client.post("/agents/booking-agent/runs", data={"message": "Lima", "stream": "false"})
    ).json()
    url = f"/agents/booking-agent/runs/{paused['run_id']}/continue"
    session = paused["session_id"]
    response = await client.post(url, data={"session_id": session, "tools": "[{"})
    assert_error(response, 400, "BAD_REQUEST", "Invalid JSON in tools field")
    response = await client.post(
        url, data={"session_id": session, "tools": '[{"confirmed": true}]'}
    )
    assert_error(
        response,
        400,
        "BAD_REQUEST",
        "Invalid structure for tools: Object missing required field `tool_call_id` - at `$[0]`",
    )
    response = await client.post(
        url, json={"session_id": session, "tools": [{"tool_call_id": "x", "confirmed": True}]}
    )
    assert_error(response, 400, "BAD_REQUEST", "no paused tool call has the id(s) ['x']")


async def test_unknown_path_and_method(client: Client) -> None:
    assert_error(await client.get("/nowhere"), 404, "NOT_FOUND", "Not Found")
    response = await client.put("/sessions")
    assert_error(response, 405, "METHOD_NOT_ALLOWED", "Method Not Allowed")
    allowed = set(response.headers["allow"].split(", "))
    assert allowed == {"DELETE", "GET", "OPTIONS", "POST"}


async def test_bad_session_requests(client: Client) -> None:
    """AgentOS's session operations: what runpoint cannot keep or has none of is refused."""
    run = await completed_run(client)
    session = run["session_id"]
    for response, status, code, detail in [
        (
            await client.post("/sessions", json={"agent_id": "nobody"}),
            404,
            "NOT_FOUND",
            "agent nobody not found",
        ),
        (
            await client.post(
                "/sessions", json={"agent_id": "travel-agent", "session_id": session}
            ),
            409,
            "CONFLICT",
            f"session {session} already exists",
        ),
        (
            await client.post("/sessions?type=team", json={"agent_id": "travel-agent"}),
            422,
            "VALIDATION_ERROR",
            "type: Invalid enum value 'team'",
        ),
        (
            await client.post(
                "/sessions", json={"agent_id": "travel-agent", "session_state": {"a": 1}}
            ),
            422,
            "VALIDATION_ERROR",
            "session_state: Expected `null`, got `object`",
        ),
        (
            await client.post("/sessions", data={"agent_id": "travel-agent"}),
            415,
            "UNSUPPORTED_MEDIA_TYPE",
            "send the body as one of application/json, not application/x-www-form-urlencoded",
        ),
        (
            await client.post(f"/sessions/{session}/rename", json={"session_name": " "}),
            422,
            "VALIDATION_ERROR",
            "session_name must not be blank",
        ),
        (
            await client.post("/sessions/nowhere/rename", json={"session_name": "Trip"}),
            404,
            "NOT_FOUND",
            "session nowhere not found",
        ),
        (
            await client.patch(f"/sessions/{session}", json={"metadata": {"a": 1}}),
            422,
            "VALIDATION_ERROR",
            "metadata: Expected `null`, got `object`",
        ),
        (  # a body the document requires, not sent
            await client.patch(f"/sessions/{session}"),
            422,
            "VALIDATION_ERROR",
            "the body is required",
        ),
        (
            await client.request(
                "DELETE", "/sessions", json={"session_ids": [session], "session_types": []}
            ),
            422,
            "VALIDATION_ERROR",
            "session_types: Expected `array` of length >= 1",
        ),
        (
            await client.request(
                "DELETE",
                "/sessions",
                json={"session_ids": [session, "s2"], "session_types": ["agent"]},
            ),
            400,
            "BAD_REQUEST",
            "session_ids and session_types differ in length",
        ),
        (
            await client.request(
                "DELETE",
                "/sessions",
                json={"session_ids": [session, "nowhere"], "session_types": ["agent"] * 2},
            ),
            404,
            "NOT_FOUND",
            "session nowhere not found",
        ),
    ]:
        assert_error(response, status, code, detail)
    # nothing of it was done: the session is there, as it was
    kept = await client.get(f"/sessions/{session}")
    assert kept.status_code == 200
    assert kept.json()["session_name"] == run["run_input"]


def nested(depth: int) -> str:
    """JSON text `depth` levels deep, arrays and objects in turn: [{"a": [{"a": ...}]}]."""
    opening = "".join("[" if level % 2 == 0 else '{"a":' for level in range(depth))
    closing = "".join("]" if level % 2 == 0 else "}" for level in reversed(range(depth)))
    return opening + "1" + closing


async def post_json(client: Client, path: str, text: str) -> Any:
    return await client.post(path, content=text.encode(), headers={"content-type": JSON})


def multipart(fields: dict[str, bytes]) -> tuple[bytes, dict[str, str]]:
    """A multipart/form-data body of these text fields (no file), and its content type."""
    parts = [
        b'--B\r\nContent-Disposition: form-data; name="%s"\r\n\r\n%s\r\n' % (name.encode(), value)
        for name, value in fields.items()
    ]
    return b"".join(parts) + b"--B--\r\n", {"content-type": "multipart/form-data; boundary=B"}


# every operation that takes a body, in both dialects
BODIES = [
    ("POST", "/agents/travel-agent/runs"),
    ("POST", "/agents/travel-agent/runs/r1/continue"),
    ("POST", "/sessions"),
    ("DELETE", "/sessions"),
    ("PATCH", "/sessions/s1"),
    ("POST", "/sessions/s1/rename"),
    ("POST", "/v2/agents/sessions/s1/checkpoints"),
    ("POST", "/v2/agents/sessions/s1/fork"),
]


@pytest.mark.parametrize(("method", "path"), BODIES)
async def test_json_nested_too_deep_is_a_422_not_a_crash(
    client: Client, method: str, path: str, caplog: pytest.LogCaptureFixture
) -> None:
    deep = '{"message": "hi", "session_id": "s1", "deep": ' + nested(1_000) + "}"
    response = await client.request(method, path, content=deep, headers={"content-type": JSON})
    detail = "the body nests arrays and objects deeper than 64 levels"
    if path.startswith("/v2/"):
        assert response.status_code == 422
        assert response.json()["id"] == "unprocessable_entity"
        assert response.json()["message"] == detail
    else:
        assert_error(response, 422, "VALIDATION_ERROR", detail)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert (await client.get("/sessions")).json()["data"] == []


async def test_json_nesting_up_to_the_bound_is_served(client: Client) -> None:
    runs = "/agents/travel-agent/runs"
    at_the_bound = '{"message": "hi", "stream": false, "ignored": ' + nested(63) + "}"
    response = await post_json(client, runs, at_the_bound)
    assert response.status_code == 200, response.text
    # brackets inside strings do not nest
    response = await client.post(runs, json={"message": "[{" * 1_000, "stream": False})
    assert response.status_code == 200, response.text
    one_more = '{"message": "hi", "ignored": ' + nested(64) + "}"
    assert (await post_json(client, runs, one_more)).status_code == 422


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        (b'{"a": [1, {"b": []}]}', 4),
        (b'["[[[", "]]]]", {"[": "{"}]', 2),
        (b'["\\"[[", []]', 2),  # an escaped quote does not end the string
        (b'["\\\\", [[]]]', 3),  # an escaped backslash does not escape the quote
        (b'["\\\\\\"[", []]', 2),
        (b"[" * 1_000, 1_000),  # never closed: as deep as a decoder would go
    ],
)
def test_json_depth_counts_brackets_outside_strings(text: bytes, depth: int) -> None:
    assert json_depth.deeper_than(text, depth - 1)
    assert not json_depth.deeper_than(text, depth)


@pytest.mark.parametrize("how", ["form", "multipart"])
async def test_tools_json_text_nested_too_deep_is_a_422(client: Client, how: str) -> None:
    url = "/agents/booking-agent/runs/r1/continue"
    tools = "[" + nested(1_000) + "]"
    if how == "form":
        response = await client.post(url, data={"session_id": "s1", "tools": tools})
    else:
        body, headers = multipart({"session_id": b"s1", "tools": tools.encode()})
        response = await client.post(url, content=body, headers=headers)
    assert_error(
        response, 422, "VALIDATION_ERROR", "tools nests arrays and objects deeper than 64 levels"
    )


FORM = {"content-type": "application/x-www-form-urlencoded"}


@pytest.mark.parametrize(
    ("body", "headers", "detail"),
    [
        (b"message=a%ED%A0%80b%ff&stream=false", FORM, "the body is not valid UTF-8"),
        (b"message=a\xed\xa0\x80b\xff&stream=false", FORM, "the body is not valid UTF-8"),
        (
            *multipart({"message": b"a\xed\xa0\x80b\xff", "stream": b"false"}),
            "the body is not valid UTF-8 (or the charset its part names)",
        ),
        (
            b'{"message": "a\xed\xa0\x80b\xff", "stream": false}',
            {"content-type": JSON},
            "the body is not valid JSON",
        ),
    ],
    ids=["form", "form, raw bytes", "multipart", "json"],
)
async def test_text_that_is_not_utf8_is_refused_not_replaced(
    client: Client, body: bytes, headers: dict[str, str], detail: str
) -> None:
    response = await client.post("/agents/travel-agent/runs", content=body, headers=headers)
    assert_error(response, 422, "VALIDATION_ERROR", detail)
    assert (await client.get("/sessions")).json()["data"] == []


async def test_a_query_string_that_is_not_utf8_is_refused_where_it_is_read(client: Client) -> None:
    response = await client.get("/v2/agents/sessions/s1/checkpoints?page_token=a%ff")
    assert response.status_code == 422
    assert response.json()["message"] == "the query string is not valid UTF-8"
    response = await client.get("/sessions?limit=1&page=1&%ED%A0%80=1")
    assert_error(response, 422, "VALIDATION_ERROR", "the query string is not valid UTF-8")
    # an operation that reads no query ignores one, as it ignores any name it does not know
    assert (await client.get("/agents?%ff=1")).status_code == 200


@pytest.mark.parametrize(
    "body", [b"message=caf%C3%A9&stream=false", b"message=caf\xc3\xa9&stream=false"]
)
async def test_a_form_in_utf8_is_read_as_utf8(client: Client, body: bytes) -> None:
    """Escaped or not (browsers escape, some clients do not), UTF-8 is read as UTF-8."""
    response = await client.post("/agents/travel-agent/runs", content=body, headers=FORM)
    assert response.status_code == 200, response.text
    assert response.json()["run_input"] == "café"
