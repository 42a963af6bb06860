"""A run that dies: `python -m tests.kernel.crashing DB COUNTER [WHERE]` starts a run that
counts its tool calls in COUNTER and freezes, for the parent to kill it:
- `after-checkpoint` (the default): right after its second checkpoint is committed;
- `mid-call`: inside its third tool call, after the call's effect (the count) happened;
- `born`: as its first step starts, right after the run was inserted.
It prints `RUN_ID INDEX` for each checkpoint, and `RUN_ID mid-call` or `RUN_ID born` when
it froze there."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from runpoint import hookimpl
from runpoint.core.types import Checkpoint, Run
from runpoint.facade import CreateRun, Runpoint
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost

FREEZE = os.environ.get("FREEZE", "after-checkpoint")


def count_population(city: str) -> str:
    """Look up a city's population, counting each call in a file."""
    with open(os.environ["COUNTER"], "a") as counter:
        counter.write(city + "\n")
    if FREEZE == "mid-call" and city == "Lagos":
        print(f"{os.environ['RUN_ID']} mid-call", flush=True)
        time.sleep(600)
    return f"{city}: many"


agent = Agent(id="counter", model="scripted:demo", tools=[count_population])
QUESTION = "Paris, Tokyo and Lagos"
# short, so the test need not wait long for the lease to run out
LEASE_SECONDS = float(os.environ.get("LEASE_SECONDS", 1.0))


class Freeze:
    @hookimpl
    def runpoint_run_started(self, run: Run) -> None:
        os.environ["RUN_ID"] = run.run_id
        if FREEZE == "born":
            print(f"{run.run_id} born", flush=True)
            time.sleep(600)

    @hookimpl
    def runpoint_checkpoint_written(self, run: Run, checkpoint: Checkpoint) -> None:
        print(f"{run.run_id} {checkpoint.message_index}", flush=True)
        if FREEZE == "after-checkpoint" and checkpoint.message_index == 5:
            time.sleep(600)  # the parent kills us here, mid-run


async def kill(
    database: str,
    counter: Path,
    where: str = "after-checkpoint",
    *,
    lease_seconds: float = LEASE_SECONDS,
) -> str:
    """Start this module's run in a child process (holding leases of `lease_seconds`),
    SIGKILL it where it freezes, and return the run's id."""
    child = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.kernel.crashing", database, str(counter), where),
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[2],
        env=os.environ | {"LEASE_SECONDS": str(lease_seconds)},
    )
    assert child.stdout is not None
    frozen = "5" if where == "after-checkpoint" else where
    async with asyncio.timeout(60):
        while (line := (await child.stdout.readline()).decode().split())[1] != frozen:
            pass
    child.kill()  # SIGKILL: no cleanup, no last write
    await child.wait()
    return line[0]


async def main(database: str) -> None:
    host = PluginHost([Freeze()])
    async with Runpoint([agent], database=database, host=host, lease_seconds=LEASE_SECONDS) as rp:
        await (await rp.create_run(CreateRun(agent_id="counter", message=QUESTION))).result()


if __name__ == "__main__":
    os.environ["COUNTER"] = sys.argv[2]
    os.environ["FREEZE"] = FREEZE = sys.argv[3] if len(sys.argv) > 3 else FREEZE
    asyncio.run(main(sys.argv[1]))
