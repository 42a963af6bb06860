"""A process that dies holding a person's decisions:
`python -m tests.kernel.deciding DB RUN_ID DECISIONS WHERE` continues the paused run RUN_ID
of `booker` with DECISIONS (JSON: tool_call_id -> true, false or the call's result) and
freezes, for the parent to kill it:
- `accepted`: as its execution starts, right after the continue was written;
- `mid-call`: inside the first booking it makes, after the booking (the count) happened.
It prints `frozen` when it froze. Every booking is counted, one line each, in $COUNTER."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path

from runpoint import hookimpl
from runpoint.core.types import Decision, Run, ToolCall
from runpoint.facade import ContinueRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel, call_id
from runpoint.seams.agent import Agent, tool
from runpoint.seams.host import PluginHost
from runpoint.seams.model import ModelRequest, ModelResponse

CITIES = ("Paris", "Tokyo", "Lagos")


@tool(requires_confirmation=True, effect="side-effect")
def book(city: str) -> str:
    """Book a city (a person confirms it first); each booking is counted in $COUNTER."""
    with open(os.environ["COUNTER"], "a") as counter:
        counter.write(city + "\n")
    if os.environ.get("FREEZE") == "mid-call":
        print("frozen", flush=True)
        time.sleep(600)
    return f"{city}: booked"


def plan(request: ModelRequest) -> ModelResponse:
    """Book every city in one batch, then report what each booking said."""
    if results := [m.content or "" for m in request.messages if m.role == "tool"]:
        return ModelResponse(content="; ".join(results))
    calls = [ToolCall(call_id(request, i), "book", {"city": c}) for i, c in enumerate(CITIES)]
    return ModelResponse(content="Booking.", tool_calls=calls)


agent = Agent(id="booker", model=ScriptedModel(plan, name="scripted:book-all"), tools=[book])


class FreezeOnStart:
    @hookimpl
    def runpoint_run_started(self, run: Run) -> None:
        print("frozen", flush=True)
        time.sleep(600)


async def kill(database: str, run_id: str, decisions: dict[str, Decision], where: str) -> None:
    """Continue the run with the decisions in a child process, and SIGKILL it where it
    freezes."""
    child = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.kernel.deciding", database, run_id),
        *(json.dumps(decisions), where),
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert child.stdout is not None
    async with asyncio.timeout(60):
        while (line := (await child.stdout.readline()).decode()) != "frozen\n":
            assert line, "the child exited before it froze"
    child.kill()  # SIGKILL: no cleanup, no last write
    await child.wait()


async def main(database: str, run_id: str, decisions: dict[str, Decision], where: str) -> None:
    os.environ["FREEZE"] = where
    host = PluginHost([FreezeOnStart()] if where == "accepted" else [])
    async with Runpoint([agent], database=database, host=host, lease_seconds=1.0) as rp:
        await (await rp.continue_run(ContinueRun(run_id=run_id, tools=decisions))).result()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]))
