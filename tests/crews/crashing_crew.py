"""A team run that dies inside a member's run: `python -m tests.crews.crashing_crew DB
COUNTER WHERE` starts a run of `crew`, whose member `counter` counts its side-effecting
calls in COUNTER, and freezes for the parent to kill it, once the member `reader` has
finished:
- `member-checkpoint`: right after the first checkpoint of `counter`'s run is committed;
- `mid-call`: inside `counter`'s call for Tokyo, after its effect (the count) happened.
It prints `frozen TEAM_RUN_ID` when it froze. Its leader names its calls afresh each time
it is asked, as a vendor's model does."""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

import msgspec

from runpoint import hookimpl
from runpoint.core.types import Checkpoint, Run
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel, lead_turn
from runpoint.seams.agent import Agent, tool
from runpoint.seams.crew import Crew
from runpoint.seams.host import PluginHost
from runpoint.seams.model import ModelRequest, ModelResponse

WHERE = os.environ.get("FREEZE", "member-checkpoint")
QUESTION = "Paris, Tokyo and Lagos"
LEASE_SECONDS = 1.0


@tool
def count_visit(city: str) -> str:
    """Write a visit down, counting each call in a file.

    Args:
        city: The city.
    """
    while Freeze.armed and not Freeze.reader_done:  # (a thread) `reader` ends first
        time.sleep(0.01)
    with open(os.environ["COUNTER"], "a") as counter:
        counter.write(city + "\n")
    if WHERE == "mid-call" and city == "Tokyo":
        freeze()
    return f"{city}: noted"


@tool(effect="read")
def look_up(city: str) -> str:
    """Look a city up.

    Args:
        city: The city.
    """
    return f"{city}: found"


def fresh_lead_turn(request: ModelRequest) -> ModelResponse:
    """scripted:lead's turn, its delegation calls under new ids (a member run is found by
    its call's id: a leader asked again after a crash must not start its members over)."""
    response = lead_turn(request)
    calls = [msgspec.structs.replace(c, id=f"call_{uuid.uuid4().hex}") for c in response.tool_calls]
    return msgspec.structs.replace(response, tool_calls=calls)


agents = [
    Agent(id="counter", model="scripted:demo", tools=[count_visit]),
    Agent(id="reader", model="scripted:demo", tools=[look_up]),
    Crew(
        id="crew",
        model=ScriptedModel(fresh_lead_turn, name="scripted:lead"),
        members=["reader", "counter"],
    ),
]


class Freeze:
    """Freezes the process (the whole loop) where the parent kills it."""

    armed = False  # in the process to be killed only
    team_run = ""
    reader_done = False

    @hookimpl
    def runpoint_run_started(self, run: Run) -> None:
        if run.agent_id == "crew":
            Freeze.team_run = run.run_id

    @hookimpl
    def runpoint_run_finished(self, run: Run) -> None:
        Freeze.reader_done |= run.agent_id == "reader"

    @hookimpl
    def runpoint_checkpoint_written(self, run: Run, checkpoint: Checkpoint) -> None:
        if WHERE == "member-checkpoint" and run.agent_id == "counter":
            freeze()


def freeze() -> None:
    print(f"frozen {Freeze.team_run}", flush=True)
    time.sleep(600)


async def kill(database: str, counter: Path, where: str) -> str:
    """Start the team run in a child process, SIGKILL it where it froze, and return the
    team run's id."""
    child = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.crews.crashing_crew", database, str(counter), where),
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert child.stdout is not None
    async with asyncio.timeout(60):
        while not (line := (await child.stdout.readline()).decode()).startswith("frozen"):
            assert line, "the child ended without freezing"
    child.kill()  # SIGKILL: no cleanup, no last write
    await child.wait()
    return line.split()[1]


async def main(database: str) -> None:
    Freeze.armed = True
    host = PluginHost([Freeze()])
    async with Runpoint(agents, database=database, host=host, lease_seconds=LEASE_SECONDS) as rp:
        await (await rp.create_run(CreateRun(agent_id="crew", message=QUESTION))).result()


if __name__ == "__main__":
    os.environ["COUNTER"] = sys.argv[2]
    os.environ["FREEZE"] = WHERE = sys.argv[3]
    asyncio.run(main(sys.argv[1]))
