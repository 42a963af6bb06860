"""Requests that die holding their Idempotency-Keys: `python -m tests.kernel.crashing_keys
DB` sends `len(KEYS)` keyed creates at once and freezes as the `FREEZE_AT`th run starts,
for the parent to kill it: the runs before it were written (and answered), and the keys
after it were claimed or not yet. It prints `frozen` when it froze there."""

from __future__ import annotations

import asyncio
import sys
import time

from runpoint import hookimpl
from runpoint.core.types import Run
from runpoint.facade import CreateRun, Runpoint
from runpoint.runs.executor import RunHandle
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost
from tests.kernel.crashing_session import kill_frozen

agent = Agent(id="echo", model="scripted:demo")
KEYS = [f"order-{i}" for i in range(20)]
FREEZE_AT = 5
LEASE_SECONDS = 0.5  # short: the claims and runs it leaves run out soon after it dies


async def create(rp: Runpoint, key: str) -> RunHandle:
    """The request sent with `key` (its retry is the same request)."""
    return await rp.create_run(
        CreateRun(agent_id=agent.id, message=f"book {key}"), idempotency_key=key
    )


class Freeze:
    def __init__(self) -> None:
        self.started = 0

    @hookimpl
    def runpoint_run_started(self, run: Run) -> None:
        self.started += 1
        if self.started == FREEZE_AT:
            print("frozen", flush=True)
            time.sleep(600)  # blocks the event loop: nothing else is written, leases included


async def kill(database: str) -> None:
    """Send the keyed creates in a child process and SIGKILL it where it freezes."""
    await kill_frozen("tests.kernel.crashing_keys", database)


async def main(database: str) -> None:
    host = PluginHost([Freeze()])
    async with Runpoint([agent], database=database, host=host, lease_seconds=LEASE_SECONDS) as rp:
        await asyncio.gather(*(create(rp, key) for key in KEYS))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
