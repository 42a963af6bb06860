"""Encryption at rest, what it costs: a 1,000-message run's build through the OpenAI
provider (the official SDK, against the zero-latency vendor server of providers.py) and the
timeline and snapshot reads of it, with and without a keyring, side by side in one
process (alternating, medians); then a key rotation on SQLite and on a throwaway
PostgreSQL server: the team keys wrapped anew, every document read once, none rewritten.

    .venv/bin/python contrib/bench/encryption.py [--messages 1000] [--rounds 3] [--reads 200]
                                                [--rotate-runs 40]

CPU is this process's (the vendor server has its own). Target: at most 15% more CPU with
encryption, per model turn and per read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, for tests.postgres
from providers import agent, measured, vendor_server

from runpoint.core.keyring import Keyring
from runpoint.facade import CreateRun, Runpoint
from runpoint.seams.storage import Encrypted
from tests.postgres import TemporaryServer, binaries

KEY = {"bench-1": os.urandom(32)}


async def build(database: str, keyring: Keyring | None, calls: int) -> tuple[str, float]:
    """A run of `calls` tool calls (2 calls + 2 messages each) and its CPU per model turn
    in ms."""
    async with Runpoint([agent("openai")], database=database, keyring=keyring) as rp:
        start = CreateRun(agent_id="bench", message=f"calls: {calls}")
        r = await measured(lambda: rp.create_run(start), rp, False)
        return r.run_id, r.cpu_per_turn_ms


async def per_read(rp: Runpoint, read: Callable[[], Awaitable[Any]], count: int) -> float:
    """CPU ms per call of `read`."""
    await read()
    cpu = time.process_time()
    for _ in range(count):
        await read()
    return 1000 * (time.process_time() - cpu) / count


async def reads(database: str, keyring: Keyring | None, run_id: str, n: int) -> tuple[float, ...]:
    async with Runpoint([agent("openai")], database=database, keyring=keyring) as rp:
        run = await rp.storage.get_run(run_id)
        assert run is not None
        timeline = await per_read(rp, lambda: rp.timeline(run_id), n)
        snapshot = await per_read(rp, lambda: rp.views.snapshot(run_id, run.message_count), n // 10)
        return timeline, snapshot


async def compare(messages: int, rounds: int, n: int) -> None:
    calls = messages // 2 - 1
    side: dict[str, list[tuple[float, ...]]] = {"clear": [], "sealed": []}
    with vendor_server(), tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for name, keyring in (("clear", None), ("sealed", Keyring(KEY))):
                database = f"sqlite:///{tmp}/{name}-{r}.db"
                run_id, per_turn = await build(database, keyring, calls)
                side[name].append((per_turn, *await reads(database, keyring, run_id, n)))
    print(f"SQLite, a run of {messages:,} messages (OpenAI Responses), medians of {rounds}:")
    print(f"{'':<26}{'clear':>10}{'sealed':>10}{'more':>9}")
    labels = ("CPU per model turn, ms", "CPU per timeline read, ms", "CPU per snapshot read, ms")
    for i, label in enumerate(labels):
        clear = statistics.median(s[i] for s in side["clear"])
        sealed = statistics.median(s[i] for s in side["sealed"])
        print(f"{label:<26}{clear:>10.3f}{sealed:>10.3f}{100 * (sealed / clear - 1):>8.1f}%")


async def rotation(database: str, runs: int) -> None:
    """A rotation to a new key, of `runs` runs of 100 messages: its time."""
    with vendor_server():
        async with Runpoint([agent("openai")], database=database, keyring=Keyring(KEY)) as rp:
            for _ in range(runs):
                await (
                    await rp.create_run(CreateRun(agent_id="bench", message="calls: 49"))
                ).result()
    rotated = Keyring({"bench-2": os.urandom(32), **KEY})
    async with Runpoint([agent("openai")], database=database, keyring=rotated) as rp:
        storage = rp.storage
        assert isinstance(storage, Encrypted)
        wall = time.perf_counter()
        done = await storage.reseal(encrypt=False, check=False, batch=500)
        wall = time.perf_counter() - wall
    kind = database.split(":")[0]
    print(
        f"rotation on {kind}: {done.rewrapped} team key wrapped anew and {done.resealed} "
        f"documents rewritten, every document of {runs} runs of 100 messages read once (to "
        f"find any not under its team's key), in {wall:.2f} s"
    )


async def main(args: argparse.Namespace) -> None:
    await compare(args.messages, args.rounds, args.reads)
    with tempfile.TemporaryDirectory() as tmp:
        await rotation(f"sqlite:///{tmp}/rotate.db", args.rotate_runs)
    bin_dir = binaries()
    if bin_dir is None:
        print("no PostgreSQL binaries: rotation on PostgreSQL not measured")
        return
    server = TemporaryServer(bin_dir)
    try:
        await rotation(server.start(), args.rotate_runs)
    finally:
        server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reads", type=int, default=200, help="timeline reads per side")
    parser.add_argument("--rotate-runs", type=int, default=40, help="runs of 100 messages")
    asyncio.run(main(parser.parse_args()))
