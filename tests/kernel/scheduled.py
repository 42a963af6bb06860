"""Agents and helpers of the schedule tests, and a process that fires schedules:
`python -m tests.kernel.scheduled DB SECONDS` serves DB's schedules for SECONDS (the real
clock), then exits; `python -m tests.kernel.scheduled DB freeze` fires the due ticks and
freezes right after it claimed one, before its run is written (it prints `frozen`)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from runpoint.core.schedule import Schedule
from runpoint.core.types import ToolCall, new_id
from runpoint.facade import Runpoint
from runpoint.plugins.scripted import ScriptedModel
from runpoint.seams.agent import Agent
from runpoint.seams.model import ModelRequest, ModelResponse

echo = Agent(id="echo", model=ScriptedModel([ModelResponse(content="done")]))


def wait() -> str:
    """Wait a moment."""
    return "waited"


def _waiting(request: ModelRequest) -> ModelResponse:
    return ModelResponse(tool_calls=[ToolCall(id=new_id(), name="wait")])


# a run that goes on for a minute, a boundary every half second
slow = Agent(id="slow", model=ScriptedModel(_waiting, latency=0.5), tools=[wait], max_turns=120)


def note(city: str) -> str:
    """Note a city (each call counted in the file $COUNTER)."""
    with open(os.environ["COUNTER"], "a") as counter:
        counter.write(city + "\n")
    return f"{city}: noted"


def _flaky(request: ModelRequest) -> ModelResponse:
    """Calls `note` once, then fails its next turn the first time (a marker file)."""
    if request.messages[-1].role == "user":
        return ModelResponse(
            tool_calls=[ToolCall(id="c1", name="note", arguments={"city": "Oslo"})]
        )
    failed = Path(os.environ["COUNTER"] + ".failed")
    if not failed.exists():
        failed.touch()
        raise RuntimeError("the model is down")
    return ModelResponse(content="noted Oslo")


flaky = Agent(id="flaky", model=ScriptedModel(_flaky), tools=[note])
AGENTS = [echo, slow, flaky]


def every(seconds: int = 1, **fields: Any) -> Schedule:
    """A schedule of `echo` firing every `seconds` seconds."""
    cron = f"* * * * * */{seconds}" if seconds > 1 else "* * * * * *"
    return Schedule(
        schedule_id=new_id(), name="tick", agent_id="echo", message="go", cron_expr=cron, **fields
    )


async def serve(database: str, seconds: float) -> None:
    async with Runpoint(AGENTS, database=database, schedule_seconds=0.2):
        await asyncio.sleep(seconds)


async def freeze(database: str) -> None:
    async with Runpoint(AGENTS, database=database, schedule=False, lease_seconds=1.0) as rp:
        storage: Any = rp.storage
        written = storage.create_sessions

        async def freezing(*args: Any, **kwargs: Any) -> Any:
            print("frozen", flush=True)  # its tick is claimed; its run is not written
            await asyncio.sleep(600)
            return await written(*args, **kwargs)

        storage.create_sessions = freezing
        await rp.scheduler.run_due()


if __name__ == "__main__":
    db, how = sys.argv[1:3]
    asyncio.run(freeze(db) if how == "freeze" else serve(db, float(how)))
