"""Numbers and booleans are read exactly as the document writes them: an integer in text
(a path, a query, a form field) is ASCII digits with an optional minus, a form's boolean
is "true" or "false", a JSON integer is a JSON number without a fraction. Anything else is
refused before anything starts, never read as something near it."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

Client = AsyncTestClient[Litestar]
JSON = "application/json"
# near-integers: spaces, a plus, an underscore, Arabic-Indic and full-width digits, and
# more digits than Python's int() reads (a ValueError, once a 500)
NEAR_INTEGERS = [" 3 ", "+3", "0_3", "\u0663", "\uff13", "3\n", "9" * 5000]


async def completed_run(client: Client) -> dict[str, Any]:
    response = await client.post(
        "/agents/travel-agent/runs", data={"message": "Paris and Tokyo", "stream": "false"}
    )
    assert response.status_code == 200, response.text
    run: dict[str, Any] = response.json()
    return run


async def test_a_message_index_is_ascii_digits(client: Client) -> None:
    run = await completed_run(client)
    path = f"/agents/travel-agent/runs/{run['run_id']}/checkpoints"
    for index in NEAR_INTEGERS:
        response = await client.get(
            f"{path}/{quote(index)}", params={"session_id": run["session_id"]}
        )
        assert response.status_code == 422, (index[:10], response.text)
        assert response.json()["detail"] == "message_index: Expected `int`, got `str`"
    three = await client.get(f"{path}/3", params={"session_id": run["session_id"]})
    assert three.status_code == 200 and three.json()["message_index"] == 3


@pytest.mark.parametrize("continue_from", NEAR_INTEGERS[:-1])  # the last: over maxLength
async def test_continue_from_is_a_keyword_or_ascii_digits(
    client: Client, continue_from: str
) -> None:
    run = await completed_run(client)
    response = await client.post(
        f"/agents/travel-agent/runs/{run['run_id']}/continue",
        data={"session_id": run["session_id"], "continue_from": continue_from, "input": "Go"},
    )
    assert response.status_code == 400, response.text
    assert response.json() == {
        "detail": "continue_from must be 'end', 'last_user' or a message index, "
        f"not {continue_from!r}",
        "error_code": "INVALID_BOUNDARY",
    }


async def test_query_integers_are_ascii_digits(client: Client) -> None:
    for value in NEAR_INTEGERS:
        response = await client.get("/sessions", params={"limit": value})
        assert response.status_code == 422, (value[:10], response.text)
    assert (await client.get("/sessions", params={"limit": "3"})).status_code == 200


@pytest.mark.parametrize("value", ["0", "1", "yes", "no", "on", "t", " true", ""])
async def test_a_form_boolean_is_true_or_false(client: Client, value: str) -> None:
    response = await client.post(
        "/agents/travel-agent/runs", data={"message": "Paris", "stream": value}
    )
    assert response.status_code == 422, response.text


@pytest.mark.parametrize("value", ["false", "False", "FALSE"])
async def test_false_in_any_case_is_false(client: Client, value: str) -> None:
    response = await client.post(
        "/agents/travel-agent/runs", data={"message": "Paris", "stream": value}
    )
    assert response.status_code == 200 and response.json()["status"] == "COMPLETED"


async def test_a_json_integer_has_no_fraction_but_may_be_written_with_a_zero_one(
    client: Client,
) -> None:
    session_id = (await completed_run(client))["session_id"]
    fork = f"/v2/agents/sessions/{session_id}/fork"
    for count in ["2.5", '"2"', "true", "1e400", "2" * 5000]:
        body = f'{{"count": {count}}}'.encode()
        response = await client.post(fork, content=body, headers={"content-type": JSON})
        assert response.status_code == 422, (count[:10], response.text)
    # JSON Schema, which the document is written in, says 2.0 is the integer 2
    for count in ["2.0", "2e0", "20e-1"]:
        body = f'{{"count": {count}}}'.encode()
        response = await client.post(fork, content=body, headers={"content-type": JSON})
        assert response.status_code == 200 and len(response.json()["sessions"]) == 2
