"""A long run that stops around packing (plugins/sql/packs.py): `python -m
tests.kernel.crashing_packs DB WHERE [AGENT_ID FROM]` runs `long_runs.AGENT` (or
`PAUSING`) on its input `SAID`, a run that crosses several windows, and stops when the
first window from message FROM on (0 by default) that a save completed, or left half full
as its run paused, is to be packed in a write of its own:
- `before`: after the save committed, before its packing began;
- `during`: inside the packing's transaction, the window's messages packed, its
  checkpoints not yet, nothing committed;
- `held-before`, `held-during`: there, but it waits for a line on its stdin (as a process
  stopped with SIGSTOP and woken with SIGCONT would) and then goes on: a stale writer, if
  another process took its run meanwhile. It prints `packed` when its packing is over.
Stopped, it blocks its event loop (nothing else is written, its lease included) and prints
`frozen RUN_ID`, for the parent to kill it (`crashing_session.kill_frozen`)."""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from runpoint.core.types import Run
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.sql import packing
from runpoint.plugins.sql.schema import messages
from tests.long_runs import AGENT, PAUSING

TURNS = 80  # 162 messages: windows complete at 64 and 128, and [128, 162) half full at the end
PAUSE_AT = 48  # PAUSING's run pauses with 98 messages: [64, 98) half full
SAID = {AGENT.id: f"{TURNS}", PAUSING.id: f"{TURNS} {PAUSE_AT}"}  # its input
LEASE_SECONDS = 1.0  # short, so the parent need not wait long for the lease to run out
WHERE, HELD, RUN, FROM = "before", False, AGENT.id, 0  # what the command line says


def stop(run: Run) -> None:
    if stopped:
        return
    stopped.append(run.run_id)
    print(f"frozen {run.run_id}", flush=True)
    if HELD:
        sys.stdin.readline()
    else:
        time.sleep(600)  # the parent kills us here


pack_settled, pack = packing.pack_settled, packing._pack
stopped: list[str] = []  # once: the first window's


async def stopping_pack_settled(db: Any, run: Run, first: int) -> None:
    if WHERE == "before" and any(FROM <= lo < first for lo, _ in packing.windows(run, first)):
        stop(run)
    await pack_settled(db, run, first)
    if HELD and stopped == [run.run_id]:
        print("packed", flush=True)


async def stopping_pack(conn: Any, codec: Any, run: Run, table: str, lo: int, hi: int) -> None:
    await pack(conn, codec, run, table, lo, hi)
    if WHERE == "during" and table == messages.name and lo >= FROM:
        stop(run)


async def main(database: str) -> None:
    packing.pack_settled, packing._pack = stopping_pack_settled, stopping_pack
    agents = [AGENT, PAUSING]
    async with Runpoint(agents, database=database, lease_seconds=LEASE_SECONDS) as rp:
        await (await rp.create_run(CreateRun(agent_id=RUN, message=SAID[RUN]))).result()


if __name__ == "__main__":
    HELD, WHERE = sys.argv[2].startswith("held-"), sys.argv[2].removeprefix("held-")
    if len(sys.argv) > 4:
        RUN, FROM = sys.argv[3], int(sys.argv[4])
    asyncio.run(main(sys.argv[1]))
