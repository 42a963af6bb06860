"""The session dialect over HTTP: checkpoints, rollback and fork under /v2/, its error
body with the response's request id, and 423 while a session is locked."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runpoint.adapters.litestar import build
from runpoint.facade import Runpoint
from runpoint.plugins.demo import agents
from runpoint.seams.host import PluginHost
from tests.directory_state import DirectoryState
from tests.kernel.test_session_checkpoints import start_in_flight

Client = httpx.AsyncClient


@pytest.fixture
def rp(database: str, state: DirectoryState) -> Runpoint:
    return Runpoint(agents, database=database, host=PluginHost([state]))


@pytest.fixture
async def client(rp: Runpoint) -> AsyncIterator[Client]:
    """The app over ASGI in the test's own event loop, so that requests can overlap (the
    rollback that waits in a plugin while another request asks)."""
    transport = httpx.ASGITransport(app=build(rp))
    async with rp, httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


async def new_session(client: Client, message: str = "Paris") -> str:
    response = await client.post(
        "/agents/travel-agent/runs", json={"message": message, "stream": False}
    )
    assert response.status_code == 200, response.text
    session_id: str = response.json()["session_id"]
    return session_id


def checkpoints(session_id: str) -> str:
    return f"/v2/agents/sessions/{session_id}/checkpoints"


def assert_error(response: httpx.Response, status: int, error_id: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"id", "message", "request_id"} and body["id"] == error_id
    assert body["message"]
    assert body["request_id"] == response.headers["x-request-id"]
    return body


async def test_checkpoints_are_created_listed_got_and_deleted(client: Client) -> None:
    session_id = await new_session(client)
    created = await client.post(checkpoints(session_id), json={"label": "first"})
    assert created.status_code == 201
    checkpoint = created.json()["checkpoint"]
    assert set(checkpoint) == {
        "checkpoint_id",
        "session_id",
        "status",
        "kind",
        "label",
        "event_id",
        "size_bytes",
        "created_at",
        "error_message",
    }
    assert checkpoint["status"] == "READY" and checkpoint["kind"] == "explicit"
    assert checkpoint["label"] == "first" and checkpoint["size_bytes"] > 0
    assert checkpoint["created_at"].endswith("Z") and checkpoint["error_message"] is None
    url = f"{checkpoints(session_id)}/{checkpoint['checkpoint_id']}"
    assert (await client.get(url)).json() == {"checkpoint": checkpoint}

    await new_session_run(client, session_id)
    later = (await client.post(checkpoints(session_id))).json()["checkpoint"]
    assert later["event_id"] != checkpoint["event_id"]  # a later place in the log
    first_page = (await client.get(checkpoints(session_id), params={"page_size": 1})).json()
    assert [c["checkpoint_id"] for c in first_page["checkpoints"]] == [later["checkpoint_id"]]
    token = first_page["next_page_token"]
    second_page = (
        await client.get(checkpoints(session_id), params={"page_size": 1, "page_token": token})
    ).json()
    assert second_page == {"checkpoints": [checkpoint], "next_page_token": None}
    assert_error(
        await client.get(checkpoints(session_id), params={"page_token": "zz"}), 400, "bad_request"
    )

    assert (await client.delete(url)).status_code == 204
    assert (await client.delete(url)).status_code == 204  # idempotent
    assert_error(await client.get(url), 404, "not_found")


async def new_session_run(client: Client, session_id: str, message: str = "Tokyo") -> None:
    response = await client.post(
        "/agents/travel-agent/runs",
        json={"message": message, "stream": False, "session_id": session_id},
    )
    assert response.status_code == 200, response.text


async def test_rollback_and_fork_round_trip(client: Client, state: DirectoryState) -> None:
    session_id = await new_session(client)
    sandbox = state.directory(session_id)
    sandbox.mkdir(parents=True)
    (sandbox / "state.bin").write_bytes(bytes(range(256)))
    runs_then = (await client.get(f"/sessions/{session_id}/runs")).json()
    created = await client.post(checkpoints(session_id))
    checkpoint_id = created.json()["checkpoint"]["checkpoint_id"]
    (sandbox / "state.bin").write_bytes(b"changed")
    await new_session_run(client, session_id)
    runs_after = (await client.get(f"/sessions/{session_id}/runs")).json()

    rolled = await client.post(f"{checkpoints(session_id)}/{checkpoint_id}/rollback")
    assert rolled.status_code == 200 and rolled.json() == created.json()
    assert state.files(session_id) == {"state.bin": bytes(range(256))}
    [live] = (await client.get(f"/sessions/{session_id}/runs")).json()
    assert live["forked_from_run_id"] == runs_then[0]["run_id"]
    hidden = runs_after[-1]
    history = await client.get(
        f"/agents/travel-agent/runs/{hidden['run_id']}", params={"session_id": session_id}
    )
    assert history.status_code == 200 and history.json()["run_input"] == "Tokyo"

    forked = await client.post(
        f"/v2/agents/sessions/{session_id}/fork",
        json={"from_checkpoint_id": checkpoint_id, "count": 3},
    )
    assert forked.status_code == 200, forked.text
    body = forked.json()
    assert body["checkpoint"]["checkpoint_id"] == checkpoint_id
    assert len(body["sessions"]) == 3
    for fork in body["sessions"]:
        assert fork["forked_from_session_id"] == session_id
        assert state.files(fork["session_id"]) == {"state.bin": bytes(range(256))}
    assert_error(
        await client.post(f"/v2/agents/sessions/{session_id}/fork", json={"count": 5}),
        422,
        "unprocessable_entity",
    )


async def test_a_session_answers_423_while_it_is_rolled_back(
    client: Client, state: DirectoryState
) -> None:
    session_id = await new_session(client)
    checkpoint = (await client.post(checkpoints(session_id))).json()["checkpoint"]
    state.hold = asyncio.Event()
    rollback = asyncio.create_task(
        client.post(f"{checkpoints(session_id)}/{checkpoint['checkpoint_id']}/rollback")
    )
    await state.restoring.wait()
    locked = assert_error(await client.get(checkpoints(session_id)), 423, "locked")
    assert "unavailable" in locked["message"]
    busy = await client.post(
        "/agents/travel-agent/runs",
        json={"message": "hi", "stream": False, "session_id": session_id},
    )
    assert busy.status_code == 423 and busy.json()["error_code"] == "LOCKED"
    state.hold.set()
    assert (await rollback).status_code == 200
    assert (await client.get(checkpoints(session_id))).status_code == 200


async def test_a_session_locked_for_maintenance_answers_423(client: Client, database: str) -> None:
    session_id = await new_session(client)

    async def runpoint(*args: str) -> str:
        command = Path(sys.executable).parent / "runpoint"
        process = await asyncio.create_subprocess_exec(
            command, *args, "--db", database, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await process.communicate()
        return out.decode().strip()

    assert await runpoint("session", "lock", session_id) == f"session {session_id}: locked"
    assert_error(await client.post(checkpoints(session_id)), 423, "locked")
    assert await runpoint("session", "unlock", session_id) == f"session {session_id}: unlocked"
    assert (await client.post(checkpoints(session_id))).status_code == 201


async def test_errors_carry_the_request_id_in_the_session_dialect_only(client: Client) -> None:
    unknown = await client.get(checkpoints("nope"), headers={"X-Request-ID": "trace-7"})
    assert assert_error(unknown, 404, "not_found")["request_id"] == "trace-7"
    assert_error(await client.get("/v2/no/such/path"), 404, "not_found")
    assert_error(await client.put(checkpoints("nope")), 405, "method_not_allowed")
    assert_error(
        await client.post(
            checkpoints("nope"), content=b"label=x", headers={"content-type": "text/plain"}
        ),
        415,
        "unsupported_media_type",
    )
    run_dialect = await client.get("/sessions/nope")
    assert run_dialect.status_code == 404
    assert set(run_dialect.json()) == {"detail", "error_code"}


async def test_a_run_in_flight_is_a_409(client: Client, rp: Runpoint) -> None:
    session_id = await new_session(client)
    ready = (await client.post(checkpoints(session_id))).json()["checkpoint"]
    await start_in_flight(rp, session_id, "travel-agent")
    assert_error(await client.post(checkpoints(session_id)), 409, "conflict")
    rollback = f"{checkpoints(session_id)}/{ready['checkpoint_id']}/rollback"
    assert_error(await client.post(rollback), 409, "conflict")


@pytest.mark.parametrize("named", [True, False])
async def test_a_fork_whose_plugin_cannot_restore_says_which_and_why(
    client: Client, state: DirectoryState, named: bool
) -> None:
    session_id = await new_session(client)
    state.directory(session_id).mkdir(parents=True)
    checkpoint = (await client.post(checkpoints(session_id))).json()["checkpoint"]
    listed = (await client.get(checkpoints(session_id))).json()
    state.fail_restore = 2

    body = {"from_checkpoint_id": checkpoint["checkpoint_id"]} if named else {}
    forked = await client.post(f"/v2/agents/sessions/{session_id}/fork", json=body | {"count": 3})
    error = assert_error(forked, 409, "conflict")
    assert error["message"] == (
        "state 'files' could not be restored: OSError: the sandbox refused the restore"
    )
    assert state.sessions() == {session_id}  # nothing left behind
    assert len((await client.get("/sessions")).json()["data"]) == 1
    assert (await client.get(checkpoints(session_id))).json() == listed


async def test_a_rollback_whose_plugin_cannot_restore_says_which_and_why(
    client: Client, state: DirectoryState
) -> None:
    session_id = await new_session(client)
    checkpoint = (await client.post(checkpoints(session_id))).json()["checkpoint"]
    await new_session_run(client, session_id)
    runs = (await client.get(f"/sessions/{session_id}/runs")).json()
    state.fail_restore = 1

    rolled = await client.post(f"{checkpoints(session_id)}/{checkpoint['checkpoint_id']}/rollback")
    error = assert_error(rolled, 409, "conflict")
    assert error["message"] == (
        "state 'files' could not be restored: OSError: the sandbox refused the restore"
    )
    assert (await client.get(f"/sessions/{session_id}/runs")).json() == runs  # unlocked, as it was
