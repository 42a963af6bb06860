"""Backup of a large SQLite database under write load: `runpoint db backup` (SQLite's online
backup API, in its own process) copies a database of `--gigabytes` while this process
writes without pause; prints how long the backup took and the write latency p99 before
and during it, then opens the copy (migrated, as a server would) and reads it.

    .venv/bin/python contrib/bench/backup.py                 # 1 GB
    .venv/bin/python contrib/bench/backup.py --gigabytes 0.1

The database is filled quickly through the storage itself: sessions each born with a run
of 25 messages of 4 KB (a birth: one write of 100 KB). A "write" of the load is the birth
of a small session (a run and 2 short messages), as a new run's is.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import msgspec
from soak import file_size, p99

from runpoint.conformance import build
from runpoint.core.tenancy import DEFAULT_TEAM
from runpoint.core.types import Message
from runpoint.plugins.sql.store import SqlStorage

COMMAND = Path(sys.executable).parent / "runpoint"
FILL_MESSAGES, FILL_BYTES = 25, 4000


async def birth(storage: SqlStorage, count: int, size: int) -> None:
    """A new session with a finished run of `count` messages of `size` characters."""
    session = build.session()
    run = msgspec.structs.replace(build.run(session), message_count=count)
    text = "x" * size
    incoming = [Message(role="user", content=f"{n} {text}") for n in range(count)]
    await storage.create_sessions([session], [run], {run.run_id: incoming})


async def fill(storage: SqlStorage, path: Path, gigabytes: float) -> None:
    began, target = time.time(), gigabytes * 1e9
    while file_size(str(path)) < target:
        await asyncio.gather(*(birth(storage, FILL_MESSAGES, FILL_BYTES) for _ in range(50)))
    print(f"filled to {file_size(str(path)) / 1e9:.2f} GB in {time.time() - began:.0f}s")


async def bench(url: str, path: Path, copy: Path, gigabytes: float) -> None:
    storage = SqlStorage(url)
    await storage.open()
    await fill(storage, path, gigabytes)
    writes: list[tuple[float, float]] = []  # (start, end)

    stopping = asyncio.Event()

    async def write() -> None:
        while not stopping.is_set():  # not cancelled: a write ends whole
            start = time.time()
            await birth(storage, 2, 100)
            writes.append((start, time.time()))

    writers = [asyncio.create_task(write()) for _ in range(2)]
    await asyncio.sleep(10)  # writes without a backup
    started = time.time()
    backup = await asyncio.create_subprocess_exec(
        COMMAND, "db", "backup", "--db", url, str(copy), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await backup.communicate()
    ended = time.time()
    await asyncio.sleep(1)
    stopping.set()
    await asyncio.gather(*writers)
    await storage.close()
    print(out.decode().strip())
    before = [e - s for s, e in writes if e < started]
    during = [e - s for s, e in writes if s >= started and e <= ended]
    print(
        f"backup of {file_size(str(path)) / 1e9:.2f} GB: {ended - started:.1f}s "
        f"(exit {backup.returncode}); copy {file_size(str(copy)) / 1e9:.2f} GB"
    )
    print(
        f"write latency p99 before: {p99(before)} ms ({len(before)} writes in 10s), "
        f"during the backup: {p99(during)} ms ({len(during)} writes)"
    )
    copied = SqlStorage(f"sqlite:///{copy}")
    await copied.open()  # migrates, as a server starting on it would
    try:
        sessions = await copied.list_sessions(team_id=DEFAULT_TEAM, limit=1, offset=0)
        print(f"the copy opens and reads: {len(sessions)} session read back")
    finally:
        await copied.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path, copy = Path(tmp) / "runpoint.db", Path(tmp) / "copy.db"
        asyncio.run(bench(f"sqlite:///{path}", path, copy, args.gigabytes))


if __name__ == "__main__":
    main()
