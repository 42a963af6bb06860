"""An execution nobody streams holds a lone event for its next boundary (`EventLog.hold`): a
turn that answers within the hold writes once; one that takes longer shows its events
while it waits, and a streamed run shows each at once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from runpoint.core.types import RunStatus
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.demo import agents as demo_agents
from runpoint.plugins.scripted import ScriptedModel
from runpoint.runs import executor
from runpoint.runs.executor import UNWATCHED_HOLD
from runpoint.seams.agent import Agent
from runpoint.seams.model import ModelRequest, ModelResponse
from tests.conftest import OpenRunpoint


def counting_appends(rp: Runpoint, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The events of each write between boundaries, by name, as the storage gets them."""
    appended: list[list[str]] = []
    append = rp.storage.append_events

    async def counted(run: Any, events: Sequence[Any]) -> bool:
        appended.append([e.event for e in events])
        return await append(run, events)

    monkeypatch.setattr(rp.storage, "append_events", counted)
    return appended


async def test_an_unwatched_run_writes_its_turns_events_with_their_boundaries(
    open_runpoint: OpenRunpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    rp = await open_runpoint(demo_agents)
    appended = counting_appends(rp, monkeypatch)
    asked = CreateRun(agent_id="travel-agent", message="Paris, Tokyo and Lagos")
    run = await (await rp.create_run(asked)).result()
    assert run.status is RunStatus.COMPLETED
    assert appended == []  # every turn answered within the hold
    names = [e.event for e in await rp.storage.read_events(run, 0, 1_000)]
    assert names.count("ModelRequestStarted") == 4  # stored all the same, in order
    assert names[-1] == "RunCompleted"


async def test_a_turn_that_outlasts_the_hold_shows_its_start_while_it_waits(
    open_runpoint: OpenRunpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        await answer.wait()
        return ModelResponse(content="done")

    agent = Agent(id="slow", model=ScriptedModel(slow, name="scripted:slow"))
    rp = await open_runpoint([agent])
    appended = counting_appends(rp, monkeypatch)
    handle = await rp.create_run(CreateRun(agent_id="slow", message="hi"))
    loop = asyncio.get_running_loop()
    began = loop.time()
    while not appended:  # written once the hold is over, the model still thinking
        assert loop.time() - began < 5
        await asyncio.sleep(0.01)
    assert loop.time() - began >= UNWATCHED_HOLD * 0.9
    assert appended == [["RunStarted", "ModelRequestStarted"]]
    answer.set()
    assert (await handle.result()).status is RunStatus.COMPLETED


async def test_a_streamed_run_writes_a_lone_event_at_once(
    open_runpoint: OpenRunpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(executor, "UNWATCHED_HOLD", 600.0)  # were it held, it would hang
    answer = asyncio.Event()

    async def slow(request: ModelRequest) -> ModelResponse:
        await answer.wait()
        return ModelResponse(content="done")

    rp = await open_runpoint([Agent(id="slow", model=ScriptedModel(slow, name="s:slow"))])
    handle = await rp.create_run(CreateRun(agent_id="slow", message="hi"), stream=True)
    events = handle.events()
    seen = [(await asyncio.wait_for(anext(events), 10)).event for _ in range(2)]
    assert seen == ["RunStarted", "ModelRequestStarted"]  # while the model still thinks
    answer.set()
    assert [e.event async for e in events][-1] == "RunCompleted"
    assert (await handle.result()).status is RunStatus.COMPLETED
