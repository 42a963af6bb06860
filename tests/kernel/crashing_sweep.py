"""A retention sweep that dies mid-batch: `python -m tests.kernel.crashing_sweep DB` sweeps
every finished run of DB (runs retained 0 seconds) and freezes inside the removal's
transaction, after its first rows were deleted, for the parent to kill it. It prints
`frozen` when it froze there."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from runpoint.facade import Runpoint
from runpoint.plugins.demo import agents
from runpoint.plugins.sql import erase
from runpoint.seams.retention import Removed, Retention

deleted = erase.delete_rows


async def delete_then_freeze(*args: Any) -> Any:
    found = await deleted(*args)
    print("frozen", flush=True)
    await asyncio.sleep(600)  # the transaction stays open, its deletes not committed
    return found


async def main(database: str) -> Removed:
    erase.delete_rows = delete_then_freeze  # type: ignore[assignment]
    async with Runpoint(agents, database=database, retention=Retention(runs=0)) as rp:
        return await rp.sweeper.sweep_all()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
