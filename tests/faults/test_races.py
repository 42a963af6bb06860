"""Races between requests on one run or session, sent at once through two servers on one
database (two apps, as two processes would be): each loser is told of the conflict (409,
saying what changed), never a 400 for a request that was valid when it was sent, nor a
500. Each race runs several rounds, so that its requests meet in different orders."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import httpx
import pytest
from litestar.testing import AsyncTestClient

from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.plugins.demo import agents

Client = AsyncTestClient[RunpointApp]
RUNS = "/agents/booking-agent/runs"
ROUNDS = 4


@pytest.fixture
async def clients(database: str) -> AsyncIterator[tuple[Client, Client]]:
    async with (
        AsyncTestClient(create_app(agents, database=database)) as one,
        AsyncTestClient(create_app(agents, database=database)) as two,
    ):
        yield one, two


async def paused(client: Client) -> dict[str, Any]:
    response = await client.post(RUNS, data={"message": "Book Paris", "stream": "false"})
    assert response.json()["status"] == "PAUSED", response.text
    return response.json()  # type: ignore[no-any-return]


def decide(client: Client, run: dict[str, Any]) -> Awaitable[httpx.Response]:
    [call] = run["tools"]
    return client.post(
        f"{RUNS}/{run['run_id']}/continue",
        data={
            "session_id": run["session_id"],
            "stream": "false",
            "tools": json.dumps([call | {"confirmed": True}]),
        },
    )


def cancel(client: Client, run: dict[str, Any]) -> Awaitable[httpx.Response]:
    return client.post(f"{RUNS}/{run['run_id']}/cancel", params={"session_id": run["session_id"]})


def follow_up(client: Client, run: dict[str, Any]) -> Awaitable[httpx.Response]:
    form = {"session_id": run["session_id"], "stream": "false", "input": "And Rome?"}
    return client.post(f"{RUNS}/{run['run_id']}/continue", data=form)


async def race(
    clients: tuple[Client, Client],
    request: Callable[[Client, dict[str, Any]], Awaitable[httpx.Response]],
    run: dict[str, Any],
    each: int = 2,
) -> list[httpx.Response]:
    """`each` requests through each server, at once."""
    return await asyncio.gather(*(request(c, run) for c in clients for _ in range(each)))


def assert_lost_as_conflicts(answers: Sequence[httpx.Response], winners: set[int]) -> None:
    statuses = Counter(a.status_code for a in answers)
    assert set(statuses) <= winners | {409}, [(a.status_code, a.text) for a in answers]
    for answer in answers:
        if answer.status_code == 409:
            assert answer.json()["error_code"] == "CONFLICT", answer.text


async def test_concurrent_resumes_of_a_paused_run_give_the_losers_409(
    clients: tuple[Client, Client],
) -> None:
    for _ in range(ROUNDS):
        run = await paused(clients[0])
        answers = await race(clients, decide, run)
        assert_lost_as_conflicts(answers, {200})
        assert [a.status_code for a in answers].count(200) == 1
        for answer in answers:
            if answer.status_code == 409:
                assert "no longer paused" in answer.json()["detail"]


async def test_a_resume_racing_a_cancel_is_a_conflict_or_wins(
    clients: tuple[Client, Client],
) -> None:
    for _ in range(ROUNDS):
        run = await paused(clients[0])
        answers = await asyncio.gather(decide(clients[0], run), cancel(clients[1], run))
        assert_lost_as_conflicts(answers, {200})


async def test_concurrent_follow_ups_of_one_session_give_the_losers_409(
    clients: tuple[Client, Client],
) -> None:
    for _ in range(ROUNDS):
        run = await paused(clients[0])
        assert (await decide(clients[0], run)).status_code == 200
        answers = await race(clients, follow_up, run)
        assert_lost_as_conflicts(answers, {200})


def v2(path: str) -> str:
    return f"/v2/agents/sessions/{path}"


async def test_a_rollback_racing_a_follow_up_and_forks_is_a_conflict_or_wins(
    clients: tuple[Client, Client],
) -> None:
    """Whichever comes first stands; the others are told the session changed (409), or,
    while the rollback goes on, that the session is locked (423, as documented)."""
    for _ in range(ROUNDS):
        run = await paused(clients[0])
        session = run["session_id"]
        taken = await clients[0].post(v2(f"{session}/checkpoints"), json={})
        assert taken.status_code == 201, taken.text
        checkpoint = taken.json()["checkpoint"]["checkpoint_id"]
        assert (await decide(clients[0], run)).status_code == 200
        answers = await asyncio.gather(
            clients[0].post(v2(f"{session}/checkpoints/{checkpoint}/rollback")),
            follow_up(clients[1], run),
            clients[1].post(v2(f"{session}/fork"), json={"from_checkpoint_id": checkpoint}),
            clients[0].post(f"/agents/booking-agent/sessions/{session}/fork"),
        )
        statuses = [a.status_code for a in answers]
        assert set(statuses) <= {200, 409, 423}, [(a.status_code, a.text) for a in answers]


async def test_deletes_racing_a_follow_up_are_gone_or_a_conflict(
    clients: tuple[Client, Client],
) -> None:
    for _ in range(ROUNDS):
        run = await paused(clients[0])
        assert (await decide(clients[0], run)).status_code == 200
        session = run["session_id"]
        answers = await asyncio.gather(
            clients[0].delete(f"/sessions/{session}"),
            clients[1].delete(f"/sessions/{session}"),
            follow_up(clients[1], run),
        )
        statuses = [a.status_code for a in answers]
        assert set(statuses) <= {200, 204, 404, 409}, [(a.status_code, a.text) for a in answers]
