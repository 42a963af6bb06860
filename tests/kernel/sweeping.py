"""Another process sweeping: `python -m tests.kernel.sweeping DB SECONDS` sweeps DB without
pause, runs retained SECONDS, until it is killed."""

from __future__ import annotations

import asyncio
import sys

from runpoint.facade import Runpoint
from runpoint.plugins.demo import agents
from runpoint.seams.retention import Retention


async def main(database: str, seconds: str) -> None:
    async with Runpoint(agents, database=database, retention=Retention(runs=float(seconds))) as rp:
        while True:
            await rp.sweeper.sweep_all()
            await asyncio.sleep(0.01)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
