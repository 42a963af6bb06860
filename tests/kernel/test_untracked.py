"""A run's messages, tool calls and events are not tracked by the garbage collector, as the
execution holds them and as they read back: a long run's transcript adds nothing to what
each full collection walks (contrib/bench/storage.py's builds of 10,000 messages)."""

from __future__ import annotations

import gc

from runpoint import hookimpl
from runpoint.core.types import Message, Run, ToolCall
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel, call_id, turns_since_user
from runpoint.seams.agent import Agent, tool
from runpoint.seams.host import PluginHost
from runpoint.seams.model import ModelRequest, ModelResponse


@tool(effect="side-effect")
async def note(value: dict[str, list[int]]) -> str:
    """Nested arguments (a dict in a dict: such a dict is tracked) and a recorded result."""
    return str(value)


def respond(request: ModelRequest) -> ModelResponse:
    if turns_since_user(request.messages) == 1:
        return ModelResponse(content="done")
    calls = [ToolCall(call_id(request, i), "note", {"value": {"k": [i]}}) for i in range(3)]
    return ModelResponse(content="batch", tool_calls=calls)


class Appended:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    @hookimpl
    def runpoint_message_appended(self, run: Run, message: Message, index: int) -> None:
        self.messages.append(message)


async def test_a_runs_messages_calls_and_events_are_not_tracked(database: str) -> None:
    appended = Appended()
    agent = Agent(id="a", model=ScriptedModel(respond), tools=[note])
    async with Runpoint([agent], database=database, host=PluginHost([appended])) as rp:
        run = await (await rp.create_run(CreateRun(agent_id="a", message="go"))).result()
        read = await rp.storage.read_messages(run.segments, run.message_count)
        events = await rp.storage.read_events(run, 0, 100)
    calls = [c for m in [*appended.messages, *read] for c in m.tool_calls or ()]
    assert len(calls) == 6 and len(read) == len(appended.messages) == 6
    assert any(e.event == "ToolCallStarted" for e in events)
    assert not [o for o in [*appended.messages, *read, *calls, *events] if gc.is_tracked(o)]
