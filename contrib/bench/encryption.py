"""Encryption at rest, what it costs: a 1,000-message run's build through the OpenAI
provider (the official SDK, against the zero-latency vendor server of providers.py) and the
timeline and snapshot reads of it, with and without a keyring, side by side (alternating,
medians), measured three ways:

1. In process (the `Runpoint` facade; this process's CPU): the first read by the server
   that wrote the run, the first by a new server, reads repeated (their documents kept
   opened), and cold reads (nothing kept: what a new server's first read costs once warm).
2. Over HTTP, the path users take (encryption_http.py): a `runpoint serve` (SQLite;
   `--encryption-keys` a keyring file on the sealed side) builds the runs (`POST
   /agents/bench/runs`, `stream=false`), then a new `runpoint serve` on the same database
   is warmed on one run and reads the timeline (`GET .../checkpoints`) of `--http-cold`
   other runs and the snapshot at the middle (`GET .../checkpoints/{message_index}`) of as
   many more, each run exactly once (cold: the run's first request to that process), then
   the warm run's `--http-reads` times (repeated: served from the encoded documents the
   app keeps, adapters/litestar/documents.py). The sides take turns, each round's first
   side alternating. The server process's CPU (each thread's, from /proc,
   `vs_agno.cpu_seconds`) per model turn and per request.
3. On SQLite and on a throwaway PostgreSQL server, a key rotation (the team keys wrapped
   anew, every document read once, none rewritten) and `runpoint db encrypt` of a database
   written without a keyring (every document sealed and written anew), in documents a
   second.

    .venv/bin/python contrib/bench/encryption.py [--messages 1000] [--rounds 3] [--reads 200]
                                                [--http-cold 5] [--http-reads 50]
                                                [--rotate-runs 40]
                                                [--no-in-process] [--no-http] [--no-rotation]

The HTTP part builds 2 x `--rounds` x (1 + 2 x `--http-cold`) runs, about a minute with
the defaults on an idle machine. Target: at most 15% more CPU with encryption, per model
turn and per read.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, for tests.postgres
from encryption_http import HTTP_LABELS, over_http
from providers import agent, measured, vendor_server

from runpoint.core.keyring import Keyring
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.sql.schema import metadata
from runpoint.plugins.sql.sealing import SEALED
from runpoint.plugins.sql.store import SqlStorage
from runpoint.seams.storage import Encrypted
from tests.postgres import TemporaryServer, binaries

KEY = {"bench-1": os.urandom(32)}


async def build(database: str, keyring: Keyring | None, calls: int) -> tuple[Any, ...]:
    """A run of `calls` tool calls (2 calls + 2 messages each): its id, its CPU per model
    turn in ms, then the CPU ms of its first timeline and snapshot reads, by the server that
    wrote it."""
    async with Runpoint([agent("openai")], database=database, keyring=keyring) as rp:
        start = CreateRun(agent_id="bench", message=f"calls: {calls}")
        r = await measured(lambda: rp.create_run(start), rp, False)
        return r.run_id, r.cpu_per_turn_ms, *[await once(read) for read in _reads(rp, r.run_id)]


def _reads(rp: Runpoint, run_id: str) -> tuple[Callable[[], Awaitable[Any]], ...]:
    """The timeline read and the snapshot read of the run's last message."""

    async def snapshot() -> Any:
        run = await rp.storage.get_run(run_id)
        assert run is not None
        return await rp.views.snapshot(run_id, run.message_count)

    return lambda: rp.timeline(run_id), snapshot


async def once(read: Callable[[], Awaitable[Any]]) -> float:
    cpu = time.process_time()
    await read()
    return 1000 * (time.process_time() - cpu)


async def per_read(
    read: Callable[[], Awaitable[Any]], count: int, before: Callable[[], None] = lambda: None
) -> float:
    """CPU ms per call of `read` (`before` each, not counted)."""
    spent = 0.0
    for _ in range(count):
        before()
        spent += await once(read)
    return spent / count


async def reads(database: str, keyring: Keyring | None, run_id: str, n: int) -> tuple[float, ...]:
    """By a new server: its first timeline and snapshot reads (its one-time warm-up
    included), then each read's CPU ms repeated, then with nothing kept from the reads
    before (what a new server's first read of the run costs once warm)."""
    async with Runpoint([agent("openai")], database=database, keyring=keyring) as rp:
        timeline, snapshot = _reads(rp, run_id)
        first = [await once(timeline), await once(snapshot)]
        storage = rp.storage
        forget = storage.codec.forget_opened if isinstance(storage, Encrypted) else lambda: None
        return (
            *first,
            await per_read(timeline, n),
            await per_read(snapshot, n // 10),
            await per_read(timeline, n, forget),
            await per_read(snapshot, n // 10, forget),
        )


LABELS = (
    "CPU per model turn",
    "timeline, first read after the write (same server)",
    "snapshot, first read after the write (same server)",
    "timeline, first read by a new server (its warm-up too)",
    "snapshot, first read by a new server (its warm-up too)",
    "timeline read, repeated",
    "snapshot read, repeated",
    "timeline read, cold (nothing kept: a new server's first)",
    "snapshot read, cold (nothing kept: a new server's first)",
)


async def compare(messages: int, rounds: int, n: int) -> None:
    calls = messages // 2 - 1
    side: dict[str, list[tuple[float, ...]]] = {"clear": [], "sealed": []}
    with vendor_server(), tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for name, keyring in (("clear", None), ("sealed", Keyring(KEY))):
                database = f"sqlite:///{tmp}/{name}-{r}.db"
                run_id, *built = await build(database, keyring, calls)
                side[name].append((*built, *await reads(database, keyring, run_id, n)))
    print(f"SQLite, a run of {messages:,} messages (OpenAI Responses), medians of {rounds}:")
    print_table(
        LABELS, *([[s[i] for s in side[name]] for i in range(len(LABELS))] for name in side)
    )


def print_table(labels: Sequence[str], clear: list[list[float]], sealed: list[list[float]]) -> None:
    """Each label's median CPU ms of its samples, without and with a keyring."""
    print(f"{'CPU ms':<58}{'clear':>9}{'sealed':>9}{'more':>9}")
    for label, c, s in zip(labels, clear, sealed, strict=True):
        c_ms, s_ms = statistics.median(c), statistics.median(s)
        print(f"{label:<58}{c_ms:>9.3f}{s_ms:>9.3f}{100 * (s_ms / c_ms - 1):>8.1f}%")


async def documents(rp: Runpoint) -> int:
    """How many sealed documents the database holds."""
    storage = rp.storage
    assert isinstance(storage, SqlStorage)
    found = 0
    for sealed in SEALED:
        table = metadata.tables[sealed.table]
        for column in sealed.columns:
            count = select(func.count()).where(table.c[column].is_not(None))
            found += (await storage.db.read(count))[0][0]
    return int(found)


async def rotation(database: str, runs: int, encrypt: bool) -> None:
    """A rotation to a new key (or with `encrypt`, `runpoint db encrypt` of a database
    written without a keyring) of `runs` runs of 100 messages: documents per second."""
    with vendor_server():
        async with Runpoint(
            [agent("openai")], database=database, keyring=None if encrypt else Keyring(KEY)
        ) as rp:
            for _ in range(runs):
                await (
                    await rp.create_run(CreateRun(agent_id="bench", message="calls: 49"))
                ).result()
    ring = Keyring(KEY if encrypt else {"bench-2": os.urandom(32), **KEY})
    async with Runpoint([agent("openai")], database=database, keyring=ring) as rp:
        storage = rp.storage
        assert isinstance(storage, Encrypted)
        wall, cpu = time.perf_counter(), time.process_time()
        done = await storage.reseal(encrypt=encrypt, check=False, batch=500)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        found = await documents(rp)
    kind = database.split(":")[0]
    what = "db encrypt" if encrypt else "rotate-key"
    print(
        f"{what} on {kind}: {found:,} documents of {runs} runs of 100 messages, "
        f"{done.resealed:,} sealed anew, {done.rewrapped} team key wrapped anew, in "
        f"{wall:.2f} s ({found / wall:,.0f} documents a second; this process's CPU {cpu:.2f} s)"
    )


async def rotations(runs: int) -> None:
    """`rotation` both ways on SQLite, then on a throwaway PostgreSQL server."""
    for encrypt in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            await rotation(f"sqlite:///{tmp}/rotate.db", runs, encrypt)
    bin_dir = binaries()
    if bin_dir is None:
        print("no PostgreSQL binaries: rotation on PostgreSQL not measured")
        return
    for encrypt in (False, True):
        postgres = TemporaryServer(bin_dir)
        try:
            await rotation(postgres.start(), runs, encrypt)
        finally:
            postgres.stop()


def main(args: argparse.Namespace) -> None:
    if not args.no_in_process:
        asyncio.run(compare(args.messages, args.rounds, args.reads))
    if not args.no_http:
        samples = over_http(args.messages, args.rounds, args.http_cold, args.http_reads)
        print(
            f"SQLite over HTTP (`runpoint serve`, the server's CPU), runs of {args.messages:,} "
            f"messages built through it; medians of {args.rounds} rounds ({args.http_cold} cold "
            "reads of each kind a round):"
        )
        print_table(HTTP_LABELS, samples["clear"], samples["sealed"])
    if not args.no_rotation:
        asyncio.run(rotations(args.rotate_runs))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reads", type=int, default=200, help="timeline reads per side")
    parser.add_argument("--rotate-runs", type=int, default=40, help="runs of 100 messages")
    parser.add_argument("--no-rotation", action="store_true", help="no rotation figures")
    parser.add_argument("--no-in-process", action="store_true", help="no in-process figures")
    parser.add_argument("--no-http", action="store_true", help="no figures over HTTP")
    parser.add_argument(
        "--http-cold", type=int, default=5, help="over HTTP: cold reads of each kind a round"
    )
    parser.add_argument(
        "--http-reads", type=int, default=50, help="over HTTP: repeated reads of each kind"
    )
    main(parser.parse_args())
