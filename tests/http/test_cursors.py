"""The session dialect's cursors (`next_page_token`, `event_id`) are opaque: no row counter
shared by every team, no count of a session's events; the same position of a session
always gives the same text, in every process, and a token only opens for its session."""

from __future__ import annotations

import re

import pytest
from litestar.testing import AsyncTestClient

from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.plugins.demo import agents

Client = AsyncTestClient[RunpointApp]
OPAQUE = re.compile(r"[A-Za-z0-9_-]{32}")


async def session_with_checkpoints(client: Client, count: int) -> tuple[str, list[str]]:
    created = await client.post(
        "/agents/travel-agent/runs", json={"message": "Paris", "stream": False}
    )
    session_id: str = created.json()["session_id"]
    events = []
    for _ in range(count):
        made = await client.post(f"/v2/agents/sessions/{session_id}/checkpoints")
        events.append(made.json()["checkpoint"]["event_id"])
    return session_id, events


def checkpoints(session_id: str) -> str:
    return f"/v2/agents/sessions/{session_id}/checkpoints"


async def first_page_token(client: Client, session_id: str) -> str:
    page = await client.get(checkpoints(session_id), params={"page_size": 1})
    token: str = page.json()["next_page_token"]
    return token


async def test_cursors_are_opaque_and_stable(database: str) -> None:
    async with AsyncTestClient(create_app(agents, database=database)) as client:
        first, first_events = await session_with_checkpoints(client, 2)
        second, second_events = await session_with_checkpoints(client, 2)
        tokens = [await first_page_token(client, s) for s in (first, second)]
        for cursor in tokens + first_events + second_events:
            assert OPAQUE.fullmatch(cursor), cursor
        # two checkpoints with no event between share a cursor, of their session only
        assert first_events[0] == first_events[1] != second_events[0]
        assert tokens[0] != tokens[1]
        assert await first_page_token(client, first) == tokens[0]
    # another process (here: another app) on the same database gives the same text
    async with AsyncTestClient(create_app(agents, database=database)) as again:
        assert await first_page_token(again, first) == tokens[0]
        listed = (await again.get(checkpoints(first))).json()["checkpoints"]
        assert [c["event_id"] for c in listed] == first_events


async def test_a_page_token_opens_only_for_its_session(client: Client) -> None:
    first, _ = await session_with_checkpoints(client, 2)
    second, _ = await session_with_checkpoints(client, 2)
    token = await first_page_token(client, first)
    page = await client.get(checkpoints(first), params={"page_size": 1, "page_token": token})
    assert page.status_code == 200 and len(page.json()["checkpoints"]) == 1

    for session_id, bad in [(second, token), (first, "-1"), (first, "0"), (first, token[:-1])]:
        response = await client.get(checkpoints(session_id), params={"page_token": bad})
        assert response.status_code == 400, (bad, response.text)
        assert response.json()["id"] == "bad_request"
        assert response.json()["message"] == (
            f"page_token {bad!r} is not one we gave for session {session_id}"
        )


@pytest.mark.parametrize("token", ["A" * 32, "_" * 32, "é" * 10, "AAAA====", "A"])
async def test_a_made_up_page_token_is_refused(client: Client, token: str) -> None:
    session_id, _ = await session_with_checkpoints(client, 1)
    response = await client.get(checkpoints(session_id), params={"page_token": token})
    assert response.status_code == 400, response.text
