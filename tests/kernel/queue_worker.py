"""A server process without HTTP: `python -m tests.kernel.queue_worker DB NAME [--start-gated]`.

It opens a Runpoint on DB (taking runs off the queue, on PostgreSQL) and executes runs
until it is killed. Its tools leave their process's NAME in their results, so a test can
tell which process executed a run. With --start-gated it first starts a background run of
`gated`, printing its id; `hold` writes $GATES/started and waits for $GATES/open."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from runpoint.facade import CreateRun, Runpoint
from runpoint.seams.agent import Agent


def locate(city: str) -> str:
    """Say where a city is, and which process answered."""
    return f"{city}, answered by {os.environ['WORKER']}"


async def hold(city: str) -> str:
    """Keep the run in flight until the test opens the gate."""
    gates = Path(os.environ["GATES"])
    (gates / "started").touch()
    while not (gates / "open").exists():  # noqa: ASYNC110 (the gate is a file another process makes)
        await asyncio.sleep(0.02)
    return f"{city} held by {os.environ['WORKER']}"


agents = [
    Agent(id="marked", model="scripted:demo", tools=[locate]),
    Agent(id="gated", model="scripted:demo", tools=[hold]),
]


async def main(database: str, start_gated: bool) -> None:
    async with Runpoint(agents, database=database, lease_seconds=1.0) as rp:
        if start_gated:
            handle = await rp.create_run(
                CreateRun(agent_id="gated", message="Paris and Tokyo", background=True)
            )
            print(handle.run.run_id, flush=True)
        print("ready", flush=True)
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    os.environ["WORKER"] = sys.argv[2]
    asyncio.run(main(sys.argv[1], "--start-gated" in sys.argv[3:]))
