"""Events of a run nobody follows in this process wait for its next boundary (up to
`LINGER`): a fast turn is one write; a follower here gets each event as it comes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runpoint.core.types import Run, ToolCall
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel, call_id, turns_since_user
from runpoint.plugins.sql.store import SqlStorage
from runpoint.runs import event_log
from runpoint.runs.event_log import LINGER
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import ModelRequest, ModelResponse


@tool(effect="read")
async def echo(value: str) -> str:
    """Return the value."""
    return value


class Appends(SqlStorage):
    """Counts the writes of events between boundaries."""

    appends = 0

    async def append_events(self, run: Run, events: Any) -> bool:
        self.appends += 1
        return await super().append_events(run, events)


def agent(turn_seconds: float, answered: asyncio.Event | None = None) -> Agent:
    async def respond(request: ModelRequest) -> ModelResponse:
        if answered is not None:
            await answered.wait()
        await asyncio.sleep(turn_seconds)
        if turns_since_user(request.messages) == 3:
            return ModelResponse(content="done")
        return ModelResponse(tool_calls=[ToolCall(call_id(request), "echo", {"value": "v"})])

    return Agent(id="a", model=ScriptedModel(respond), tools=[echo])


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_a_fast_turn_nobody_follows_is_one_write(database: str) -> None:
    storage = Appends(database)
    async with Runpoint([agent(0)], storage=storage) as rp:
        run = await (await rp.create_run(CreateRun(agent_id="a", message="go"))).result()
        assert storage.appends == 0
        # all its events are in the log, in order
        events = await storage.read_events(run, 0, 1_000)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert events[-1].event == "RunCompleted"


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_a_slow_turn_writes_its_events_within_the_linger(database: str) -> None:
    storage = Appends(database)
    async with Runpoint([agent(4 * LINGER)], storage=storage) as rp:
        await (await rp.create_run(CreateRun(agent_id="a", message="go"))).result()
        assert storage.appends >= 3  # each turn's "model request started", on its own


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
@pytest.mark.parametrize("how", ["streamed", "joined", "joined late"])
async def test_a_follower_here_gets_each_event_as_it_comes(
    database: str, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_log, "LINGER", 3_600)  # what nobody follows waits for good
    answered = asyncio.Event()
    async with Runpoint([agent(0, answered)], database=database) as rp:
        stream = how == "streamed"
        handle = await rp.create_run(CreateRun(agent_id="a", message="go"), stream=stream)
        if how == "joined late":  # its first events wait for company
            await asyncio.sleep(0.2)
        events = handle.events() if stream else await rp.follow(handle.run.run_id)
        seen: list[str] = []
        async with asyncio.timeout(10):
            async for got in events:
                seen += [e.event for e in (got if isinstance(got, list) else [got])]
                if "ModelRequestStarted" in seen:
                    break
        # the model has not answered: the event was stored without waiting for a boundary
        assert not answered.is_set()
        answered.set()
        assert (await handle.result()).status.value == "COMPLETED"
