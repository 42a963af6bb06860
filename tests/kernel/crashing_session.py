"""A session operation that dies: `python -m tests.kernel.crashing_session DB ROOT SESSION
OPERATION [CHECKPOINT]` runs OPERATION on SESSION with two state plugins, the files under
ROOT (`tests.directory_state`) and a `gate` registered after them, which freezes for the
parent to kill the process:
- `rollback` (to CHECKPOINT): in the gate's restore, after the files were restored and
  before the session's rows were rolled back;
- `create` (a checkpoint): in the gate's capture, after the files were captured.
It prints `frozen` when it froze there."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from runpoint import hookimpl
from runpoint.facade import Runpoint
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost
from runpoint.seams.session_state import SessionState
from tests.directory_state import DirectoryState

LEASE_SECONDS = 1.0  # short, so the test need not wait long for the lease to run out
agent = Agent(id="echo", model="scripted:demo")


class Gate:
    """A state plugin that holds nothing; with `freeze`, its capture and restore stop the
    process there (the parent kills it)."""

    def __init__(self, freeze: bool = False) -> None:
        self.freeze = freeze

    @hookimpl
    def runpoint_session_state(self) -> Mapping[str, SessionState]:
        return {"gate": self}

    def _stop(self) -> None:
        if self.freeze:
            print("frozen", flush=True)
            time.sleep(600)  # blocks the event loop: nothing else is written, leases included

    async def capture(self, session_id: str) -> bytes:
        self._stop()
        return b""

    async def restore(self, session_id: str, state: bytes) -> None:
        self._stop()

    async def discard(self, session_id: str) -> None:
        pass


async def kill(database: str, root: Path, session_id: str, *operation: str) -> None:
    """Run `operation` in a child process and SIGKILL it where it freezes."""
    await kill_frozen("tests.kernel.crashing_session", database, str(root), session_id, *operation)


async def kill_frozen(module: str, *args: str) -> list[str]:
    """Run `python -m module args...` and SIGKILL it once it printed `frozen`: what it
    printed after that word."""
    child, said = await frozen(module, *args)
    child.kill()  # SIGKILL: no cleanup, no last write
    await child.wait()
    return said


async def frozen(module: str, *args: str) -> tuple[asyncio.subprocess.Process, list[str]]:
    """Run `python -m module args...` (its stdin and stdout piped) until it prints a line
    `frozen ...`: the process, and the words after `frozen`."""
    child = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", module, *args),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert child.stdout is not None
    async with asyncio.timeout(60):
        word, *said = (await child.stdout.readline()).decode().split() or [""]
    assert word == "frozen", (word, said)
    return child, said


async def main(database: str, root: str, session_id: str, operation: str, *args: str) -> None:
    host = PluginHost([DirectoryState(Path(root)), Gate(freeze=True)])
    async with Runpoint([agent], database=database, host=host, lease_seconds=LEASE_SECONDS) as rp:
        if operation == "rollback":
            await rp.session_checkpoints.rollback(session_id, *args)
        else:
            await rp.session_checkpoints.create(session_id)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
