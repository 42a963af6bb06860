"""Idempotency-Key: retries start nothing new and get the first answer."""

from __future__ import annotations

import asyncio

import httpx
from litestar import Litestar
from litestar.testing import AsyncTestClient

Client = AsyncTestClient[Litestar]

RUNS = "/agents/travel-agent/runs"


async def test_twenty_concurrent_retries_start_one_run(client: Client) -> None:
    headers = {"Idempotency-Key": "order-42"}
    body = {"message": "Paris and Tokyo", "stream": "false", "background": "true"}
    answers = await asyncio.gather(
        *[client.post(RUNS, data=body, headers=headers) for _ in range(20)]
    )
    assert {a.status_code for a in answers} == {202}
    run_ids = {a.json()["run_id"] for a in answers}
    assert len(run_ids) == 1
    [session_id] = {a.json()["session_id"] for a in answers}
    runs = await client.get(f"/sessions/{session_id}/runs")
    assert [r["run_id"] for r in runs.json()] == list(run_ids)


async def test_a_retry_gets_the_first_run_even_when_it_asks_for_a_stream(client: Client) -> None:
    headers = {"Idempotency-Key": "k-1"}
    first = await client.post(RUNS, data={"message": "Paris", "stream": "false"}, headers=headers)
    assert first.status_code == 200
    retry = await client.post(RUNS, data={"message": "Paris", "stream": "false"}, headers=headers)
    assert retry.json()["run_id"] == first.json()["run_id"]
    assert retry.json()["status"] == "COMPLETED"


async def test_a_key_reused_for_another_request_is_refused(client: Client) -> None:
    headers = {"Idempotency-Key": "k-2"}
    await client.post(RUNS, data={"message": "Paris", "stream": "false"}, headers=headers)
    other = await client.post(RUNS, data={"message": "Lima", "stream": "false"}, headers=headers)
    assert other.status_code == 400
    assert other.json()["detail"] == "Idempotency-Key 'k-2' was used for another request"


async def test_continue_and_session_fork_take_keys_too(client: Client) -> None:
    run = (await client.post(RUNS, data={"message": "Paris, Tokyo", "stream": "false"})).json()
    url = f"{RUNS}/{run['run_id']}/continue"
    body = {
        "session_id": run["session_id"],
        "continue_from": "3",
        "input": "Kyoto",
        "stream": "false",
    }
    headers = {"Idempotency-Key": "k-3"}
    forks = [await client.post(url, data=body, headers=headers) for _ in range(3)]
    assert {f.json()["run_id"] for f in forks} != {run["run_id"]}
    assert len({f.json()["run_id"] for f in forks}) == 1
    fork_url = f"/agents/travel-agent/sessions/{run['session_id']}/fork"
    sessions = [await client.post(fork_url, headers=headers) for _ in range(3)]
    assert len({s.json()["session_id"] for s in sessions}) == 1
    listed = (await client.get("/sessions")).json()["data"]
    assert sum(s.get("forked_from_session_id") == run["session_id"] for s in listed) == 1


def test_the_header_is_documented(server: str) -> None:
    spec = httpx.get(f"{server}/openapi.json").json()
    for path, method in [
        ("/agents/{agent_id}/runs", "post"),
        ("/agents/{agent_id}/runs/{run_id}/continue", "post"),
        ("/agents/{agent_id}/sessions/{session_id}/fork", "post"),
    ]:
        names = [p.get("$ref", "") for p in spec["paths"][path][method]["parameters"]]
        assert "#/components/parameters/IdempotencyKey" in names
