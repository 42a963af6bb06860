"""Every operation of openapi.yaml, tried by team beta on team alpha's session and run: what
names them is refused as the document says (404 in the run dialect, exactly as for a
missing one; 403 in the session dialect), what does not shows none of alpha's data, and
alpha's session comes out as it went in.

The operations come from the document, so a new one is tried as soon as it is added; one
whose inputs this test cannot fill fails here until it is taught them (VALUES, BODIES)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest
from litestar.testing import AsyncTestClient

from runpoint.adapters import auth
from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.adapters.litestar.spec import JSON, Operation, document, operations
from runpoint.plugins.demo import agents

from .conftest import bearer

pytestmark = pytest.mark.memory  # storage is not the subject here

Client = AsyncTestClient[RunpointApp]
ALPHA, BETA = bearer("alpha-key"), bearer("beta-key")
SECRET = "alpha-secret-7731"  # in alpha's message: no answer to beta may contain it
OWNED = (
    "session_id",
    "session_ids",
    "run_id",
    "approval_id",
    "job_id",
    "schedule_id",
)  # the inputs that name a team's things
# inputs an operation needs beyond the things it names, by operation
BODIES: dict[str, dict[str, Any]] = {
    "create_agent_run": {"message": "Paris", "stream": False},
    "continue_agent_run": {"input": "Tokyo too", "stream": False},
    "create_team_run": {"message": "Paris", "stream": False},
    "continue_team_run": {"input": "Tokyo too", "stream": False},
    "fan_out_agent_run": {"branches": [{"input": "Tokyo too"}]},
    "rename_session": {"session_name": "beta's now"},
    "update_session": {"session_name": "beta's now"},
    "delete_sessions": {"session_types": ["agent"]},
    "resolve_approval": {"status": "approved"},
    "create_schedule": {
        "name": "beta-own",
        "endpoint": "/agents/travel-agent/runs",
        "payload": {"message": "Lagos"},
    },
    "update_schedule": {"name": "betas-now"},
}


@pytest.fixture
async def client(database: str, keyed_auth: auth.Auth) -> AsyncIterator[Client]:
    async with AsyncTestClient(create_app(agents, database=database, auth=keyed_auth)) as client:
        yield client


def request(op: Operation, values: dict[str, Any]) -> dict[str, Any]:
    """The request that calls `op` on `values` (by input name), for AsyncTestClient."""
    path, query, body = op.path, {}, dict(BODIES.get(op.operation_id, {}))
    for field in op.fields:
        if field.wire_name == "team_id" and field.location != "path":
            continue  # POST /sessions's, which may only be null (a team of agents is a path's)
        if field.wire_name in values:
            value = values[field.wire_name]
        elif field.wire_name in body or not (field.required or field.location == "path"):
            continue
        else:
            pytest.fail(f"{op.operation_id}: teach this test a value for {field.wire_name}")
        if field.location == "path":
            path = path.replace("{" + field.wire_name + "}", quote(str(value), safe=""))
        elif field.location == "query":
            query[field.wire_name] = value
        elif field.location == "body":
            body[field.wire_name] = value
    sent: dict[str, Any] = {"method": op.method, "url": path, "params": query}
    if op.body_types:
        sent |= {"json": body} if JSON in op.body_types else {"data": body}
    return sent


def names_owned(op: Operation) -> bool:
    return any(f.wire_name in OWNED for f in op.fields)


async def test_another_team_gets_nothing_of_a_session_from_any_operation(client: Client) -> None:
    created = await client.post(
        "/agents/travel-agent/runs",
        data={"message": f"Paris and Tokyo, for {SECRET}", "stream": "false"},
        headers=ALPHA,
    )
    assert created.status_code == 200
    run = created.json()
    checkpoints = f"/v2/agents/sessions/{run['session_id']}/checkpoints"
    captured = await client.post(checkpoints, json={"label": SECRET}, headers=ALPHA)
    assert captured.status_code == 201
    alpha = {
        "agent_id": "travel-agent",
        "team_id": "travel-team",
        "session_id": run["session_id"],
        "run_id": run["run_id"],
        "message_index": 3,
        "checkpoint_id": captured.json()["checkpoint"]["checkpoint_id"],
    }
    booking = await client.post(
        "/agents/booking-agent/runs",
        data={"message": "Book Paris", "stream": "false"},
        headers=ALPHA,
    )
    inbox = await client.get(
        "/approvals", params={"run_id": booking.json()["run_id"]}, headers=ALPHA
    )
    alpha["approval_id"] = inbox.json()["data"][0]["id"]
    alpha["job_id"] = alpha["member_run_id"] = alpha["run_id"]
    alpha["session_ids"] = [alpha["session_id"]]
    schedule = await client.post(
        "/schedules",
        json={
            "name": "alpha",
            "endpoint": "/agents/travel-agent/runs",
            "payload": {"message": SECRET},
        },
        headers=ALPHA,
    )
    alpha["schedule_id"] = schedule.json()["id"]
    missing = alpha | {
        "session_id": str(uuid.uuid4()),
        "run_id": str(uuid.uuid4()),
        "schedule_id": str(uuid.uuid4()),
        "approval_id": str(uuid.uuid4()),
    }
    missing["job_id"] = missing["member_run_id"] = missing["run_id"]
    missing["session_ids"] = [missing["session_id"]]
    before = [
        (await client.get(path, headers=ALPHA)).json()
        for path in (f"/sessions/{run['session_id']}/runs", checkpoints)
    ]

    for op in operations(document()):
        answer = await client.request(**request(op, alpha), headers=BETA)
        where = f"{op.operation_id}: {answer.status_code} {answer.text[:300]}"
        assert SECRET not in answer.text, where
        if not names_owned(op):
            assert answer.is_success, where
            assert run["session_id"] not in answer.text, where
            assert run["run_id"] not in answer.text, where
            continue
        if op.operation_id == "list_approvals":  # a filter naming it: nothing listed
            assert answer.status_code == 200 and answer.json()["data"] == [], where
            continue
        if op.path.startswith("/v2/"):  # the session dialect says so (seed 003)
            assert answer.status_code == 403, where
            assert answer.json()["id"] == "forbidden", where
            continue
        assert answer.status_code == 404, where
        # a session no earlier operation made (a create makes the one it is given)
        fresh = missing | {"session_id": str(uuid.uuid4())}
        fresh["session_ids"] = [fresh["session_id"]]
        unknown = await client.request(**request(op, fresh), headers=BETA)
        if unknown.status_code == 404:  # not so where a missing session would be created
            assert _without(answer.text, alpha) == _without(unknown.text, fresh), where

    after = [
        (await client.get(path, headers=ALPHA)).json()
        for path in (f"/sessions/{run['session_id']}/runs", checkpoints)
    ]
    assert after == before


def _without(text: str, values: dict[str, Any]) -> str:
    """`text` with the ids it was asked about blanked out: what is left must not differ."""
    for name in OWNED:
        for value in values[name] if isinstance(values[name], list) else [values[name]]:
            text = text.replace(value, f"<{name}>")
    return text


async def test_each_team_lists_its_own_sessions(client: Client) -> None:
    for headers in (ALPHA, BETA, ALPHA):
        created = await client.post(
            "/agents/travel-agent/runs",
            data={"message": "Paris", "stream": "false"},
            headers=headers,
        )
        assert created.status_code == 200
    alpha = (await client.get("/sessions", headers=ALPHA)).json()["data"]
    beta = (await client.get("/sessions", headers=BETA)).json()["data"]
    assert (len(alpha), len(beta)) == (2, 1)
    assert not {s["session_id"] for s in alpha} & {s["session_id"] for s in beta}
    assert all("team" not in key for s in alpha + beta for key in s)  # internal, never sent


async def test_an_idempotency_key_is_each_teams_own(client: Client) -> None:
    body = {"message": "Paris", "stream": "false"}
    first = await client.post(
        "/agents/travel-agent/runs", data=body, headers=ALPHA | {"Idempotency-Key": "k"}
    )
    other = await client.post(
        "/agents/travel-agent/runs", data=body, headers=BETA | {"Idempotency-Key": "k"}
    )
    assert (first.status_code, other.status_code) == (200, 200)
    assert other.json()["run_id"] != first.json()["run_id"]
    assert other.json()["session_id"] != first.json()["session_id"]
