"""The hot reads: get-run, a snapshot and a session's runs say what the run's messages say
(read as views, encoded as stored), and a run's timeline, get-run and snapshots are made
once per state of the run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import msgspec
import pytest
from sqlalchemy import update

from runpoint.adapters.litestar import build
from runpoint.core.types import Decision, Message, Run, Segment, ToolCall
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.plugins.sql.schema import runs
from runpoint.plugins.sql.store import SqlStorage


@pytest.fixture
async def rp(database: str) -> AsyncIterator[Runpoint]:
    async with Runpoint(agents, database=database) as rp:
        yield rp


@pytest.fixture
async def client(rp: Runpoint) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=build(rp))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        yield client


def on_the_wire(m: Message) -> dict[str, Any]:
    """What a message says on the wire (docs/http.md): Agno's keys, left out when empty."""
    said: dict[str, Any] = {"id": m.id, "role": m.role, "created_at": int(m.created_at)}
    if m.tool_calls:
        said["tool_calls"] = [
            {"id": c.id, "function": function(c), "type": "function"} for c in m.tool_calls
        ]
    if m.usage:
        total = m.usage.input_tokens + m.usage.output_tokens
        said["metrics"] = {"cache_read_tokens": 0, "cache_write_tokens": 0} | {
            **msgspec.to_builtins(m.usage),
            "total_tokens": total,
            "duration": None,
            "time_to_first_token": None,
        }
    if m.role == "tool":
        said["tool_call_error"] = m.tool_call_error
    fields = ("content", "model", "tool_call_id", "tool_name", "tool_args")
    return said | {f: getattr(m, f) for f in fields if getattr(m, f) is not None}


def function(call: ToolCall) -> dict[str, str]:
    """A call on the wire, its arguments the JSON text runpoint stored: byte for byte, on
    both databases."""
    return {"name": call.name, "arguments": msgspec.json.encode(call.arguments).decode()}


async def test_a_run_reads_as_its_messages_say(rp: Runpoint, client: httpx.AsyncClient) -> None:
    answer = await client.post(
        "/agents/travel-agent/runs", json={"message": "Paris and Tokyo?", "stream": False}
    )
    run_id, session_id = answer.json()["run_id"], answer.json()["session_id"]
    detail = await rp.get_run(run_id)
    said = [on_the_wire(m) for m in detail.messages]
    tools = msgspec.to_builtins(detail.tools)
    assert any("tool_calls" in m for m in said) and any(m["role"] == "tool" for m in said)
    path = f"/agents/travel-agent/runs/{run_id}"

    got = (await client.get(path, params={"session_id": session_id})).json()
    [listed] = (await client.get(f"/sessions/{session_id}/runs")).json()
    cut = (await client.get(f"{path}/checkpoints/3", params={"session_id": session_id})).json()

    assert answer.json()["messages"] == said
    assert got["messages"] == said and got["tools"] == tools
    assert listed["messages"] == said and listed["tools"] == tools
    assert cut["snapshot"]["messages"] == said[:3]
    assert cut["snapshot"]["tools"] == [t for t in tools if t["message_index"] < 3]


class Counted:
    """Counts the storage's reads of checkpoints (or a transcript's, given `rp.views`)."""

    def __init__(self, rp: Runpoint, monkeypatch: pytest.MonkeyPatch, views: bool = False) -> None:
        self.reads = 0
        reader, name = (rp.views, "read") if views else (rp.storage, "list_checkpoints")
        read = getattr(reader, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.reads += 1
            return await read(*args, **kwargs)

        monkeypatch.setattr(reader, name, counted)


async def paused(client: httpx.AsyncClient) -> httpx.Response:
    """A run that waits for a person to confirm its call: its answer."""
    return await client.post(
        "/agents/booking-agent/runs", json={"message": "Lima", "stream": False}
    )


async def forked(rp: Runpoint) -> tuple[Run, Run]:
    """A run, and its fork at message 3."""
    source = await (
        await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris and Tokyo?"))
    ).result()
    return source, await (
        await rp.continue_run(ContinueRun(run_id=source.run_id, continue_from=3, input="Lyon?"))
    ).result()


async def test_a_timeline_is_made_once_per_revision_of_its_run(
    rp: Runpoint, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = await paused(client)
    run_id, session_id = answer.json()["run_id"], answer.json()["session_id"]
    [call] = answer.json()["tools"]
    path = f"/agents/booking-agent/runs/{run_id}/checkpoints"
    counted = Counted(rp, monkeypatch)

    first = await client.get(path, params={"session_id": session_id})
    again = await client.get(path, params={"session_id": session_id})
    assert again.content == first.content and counted.reads == 1

    decided: dict[str, Decision] = {call["tool_call_id"]: True}
    await (
        await rp.continue_run(ContinueRun(run_id=run_id, tools=decided))
    ).result()  # the same run, moved on
    moved = await client.get(path, params={"session_id": session_id})
    assert counted.reads == 2
    assert len(moved.json()["checkpoints"]) > len(first.json()["checkpoints"])
    assert moved.json()["checkpoints"][-1]["status"] == "COMPLETED"
    other = await client.get(path, params={"session_id": "another"})
    assert other.status_code == 404  # read from what is kept, refused all the same


async def test_a_forks_timeline_is_made_on_every_request(
    rp: Runpoint, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, fork = await forked(rp)
    assert fork.segments[0] == Segment(source.run_id, 0, 3)
    path = f"/agents/travel-agent/runs/{fork.run_id}/checkpoints"
    counted = Counted(rp, monkeypatch)

    first = await client.get(path, params={"session_id": fork.session_id})
    again = await client.get(path, params={"session_id": fork.session_id})

    assert again.content == first.content and counted.reads == 2
    assert first.json()["checkpoints"][0]["run_id"] == source.run_id  # its source's, inherited


async def test_a_runs_transcript_documents_are_made_once_per_state_of_the_run(
    rp: Runpoint, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = await paused(client)
    run_id, session_id = answer.json()["run_id"], answer.json()["session_id"]
    [call] = answer.json()["tools"]
    path = f"/agents/booking-agent/runs/{run_id}"
    paths = [path, f"{path}/checkpoints/1"]
    counted = Counted(rp, monkeypatch, views=True)

    async def read() -> list[dict[str, Any]]:
        got = [await client.get(p, params={"session_id": session_id}) for p in paths]
        again = [await client.get(p, params={"session_id": session_id}) for p in paths]
        assert [a.content for a in again] == [g.content for g in got]
        return [g.json() for g in got]

    run, at_one = await read()
    assert counted.reads == 2 and run == answer.json()
    assert at_one["snapshot"]["messages"] == run["messages"][:1]

    # another process's cancel changes the run's row, not its revision
    async with cast(SqlStorage, rp.storage).engine.begin() as conn:
        await conn.execute(
            update(runs).where(runs.c.run_id == run_id).values(cancel_requested=True)
        )
    run, at_one = await read()
    assert counted.reads == 4 and run["cancel_requested"]

    decided: dict[str, Decision] = {call["tool_call_id"]: True}
    await (
        await rp.continue_run(ContinueRun(run_id=run_id, tools=decided))
    ).result()  # the same run, moved on
    run, at_one = await read()
    assert counted.reads == 6 and run["status"] == "CANCELLED"  # the flag, honoured


async def test_a_forks_transcript_documents_are_made_on_every_request(
    rp: Runpoint, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, fork = await forked(rp)
    path = f"/agents/travel-agent/runs/{fork.run_id}"
    counted = Counted(rp, monkeypatch, views=True)

    for _ in range(2):
        for p in (path, f"{path}/checkpoints/3"):
            assert (await client.get(p, params={"session_id": fork.session_id})).is_success
    assert counted.reads == 4


async def test_kept_documents_follow_what_another_runpoint_does_to_the_run(
    rp: Runpoint, client: httpx.AsyncClient, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process on the same database cancels the run, then deletes its session:
    this one's kept documents are not served past either."""
    answer = await paused(client)
    run_id, session_id = answer.json()["run_id"], answer.json()["session_id"]
    path = f"/agents/booking-agent/runs/{run_id}"
    paths = [path, f"{path}/checkpoints", f"{path}/checkpoints/1"]
    counted = Counted(rp, monkeypatch, views=True)

    async def read() -> list[httpx.Response]:
        return [await client.get(p, params={"session_id": session_id}) for p in paths]

    first = await read()
    assert [r.content for r in await read()] == [r.content for r in first]
    assert counted.reads == 2  # get-run and the snapshot, made once each
    assert first[0].json()["status"] == "PAUSED"

    async with Runpoint(agents, database=database) as elsewhere:
        await elsewhere.cancel(run_id)
        cancelled = await read()
        assert [r.status_code for r in cancelled] == [200, 200, 200]
        assert cancelled[0].json()["status"] == "CANCELLED"
        assert counted.reads == 4  # both made again, for the run as it is now

        await elsewhere.delete_session(session_id)
        assert [r.status_code for r in await read()] == [404, 404, 404]


async def test_each_app_keeps_its_own_documents(
    rp: Runpoint, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documents are the app's: a second app over the same Runpoint makes its own."""
    answer = await paused(client)
    run_id, session_id = answer.json()["run_id"], answer.json()["session_id"]
    path = f"/agents/booking-agent/runs/{run_id}"
    counted = Counted(rp, monkeypatch, views=True)
    transport = httpx.ASGITransport(app=build(rp))
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as other:
        for reader in (client, client, other, other):
            got = await reader.get(path, params={"session_id": session_id})
            assert got.json() == answer.json()
    assert counted.reads == 2  # once for each app


async def test_a_listed_session_is_named_by_its_name_else_its_first_input(
    rp: Runpoint, client: httpx.AsyncClient
) -> None:
    """As AgentOS names sessions, so that Agno's agent-ui titles them in its sidebar."""
    source, fork = await forked(rp)  # two runs in one session: the first names it
    await rp.create_session("travel-agent", session_id="named", session_name="Trip")
    await rp.create_session("travel-agent", session_id="empty")
    page = (await client.get("/sessions")).json()["data"]
    names = {s["session_id"]: s["session_name"] for s in page}
    assert names == {source.session_id: "Paris and Tokyo?", "named": "Trip", "empty": ""}
    assert fork.session_id == source.session_id
    alone = (await client.get(f"/sessions/{source.session_id}")).json()
    assert alone["session_name"] == "Paris and Tokyo?"
