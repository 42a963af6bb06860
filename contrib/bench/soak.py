"""Soak: runs (with continues and session forks) made at a steady `--rate` for `--minutes`, runs
retained `--retain` seconds, the sweeper of the server process running every
`--sweep-seconds`. Each minute it prints the database's size on disk (SQLite: the file and
its WAL; PostgreSQL: pg_database_size), the runs made, and the request latency p99 of the
requests that overlapped a sweep and of those that did not; then the size at minute 5
against minute 10, and what a sweep cost per run removed.

    .venv/bin/python contrib/bench/soak.py               # SQLite, 10 minutes
    .venv/bin/python contrib/bench/soak.py --postgres    # a throwaway local PostgreSQL

A "request" is one run made and waited for (the offline scripted model: a travel-agent
run of three tool batches), a continue of it from message 3 (a fork), and, every fifth,
a session fork of its session. `--turns N` makes each run N tool batches long instead
(2N + 2 messages: past 64 they are packed, plugins/sql/packs.py) and continues it from its
middle; at the end every run and continue still kept is read again and must hold the very
messages it was read with when it was made (the command fails if one does not).

    .venv/bin/python contrib/bench/soak.py --turns 80 --rate 1 [--postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg
from databases import databases

from runpoint import hookimpl
from runpoint.core.errors import NotFound
from runpoint.core.types import Timing
from runpoint.facade import ContinueRun, CreateRun, ForkSession, Runpoint
from runpoint.plugins.demo import agents
from runpoint.seams.host import PluginHost
from runpoint.seams.retention import Removed, Retention
from tests.long_runs import AGENT as LONG  # a tool batch a turn, as many as its input says


class Sweeps:
    """The sweeps this process made: when, how long, what they removed."""

    def __init__(self) -> None:
        self.done: list[tuple[Timing, Removed]] = []

    @hookimpl
    def runpoint_retention_swept(self, removed: Removed, timing: Timing) -> None:
        self.done.append((timing, removed))

    def overlaps(self, start: float, end: float) -> bool:
        return any(t.started_at < end and start < t.started_at + t.seconds for t, _ in self.done)


async def size(url: str) -> int:
    if url.startswith("sqlite"):
        return file_size(url.removeprefix("sqlite:///"))
    connection = await asyncpg.connect(url)
    try:
        found: int = await connection.fetchval("SELECT pg_database_size(current_database())")
        return found
    finally:
        await connection.close()


async def soak(
    url: str, minutes: int, retain: float, every: float, workers: int, rate: float, turns: int
) -> bool:
    """The soak; whether every run kept read back as it was made."""
    sweeps = Sweeps()
    rp = Runpoint(
        [*agents, LONG],
        database=url,
        host=PluginHost([sweeps]),
        retention=Retention(runs=retain),
        sweep_seconds=every,
    )
    latencies: list[tuple[float, float]] = []  # (start, end)
    made = 0
    ids: dict[str, list[str]] = {}  # each long run's and continue's messages, as made
    agent, message = ("long", str(turns)) if turns else ("travel-agent", "Paris, Tokyo and Lagos")

    async def read(run_id: str) -> list[str]:
        return [m.id for m in (await rp.get_run(run_id)).messages]

    began = time.time()

    async def work() -> None:
        nonlocal made
        while True:
            # the next request's turn: `rate` a second, so the load is the same throughout
            turn, made = made, made + 1
            await asyncio.sleep(max(0.0, began + turn / rate - time.time()))
            start = time.time()
            run = await (await rp.create_run(CreateRun(agent_id=agent, message=message))).result()
            # a long run's continue asks for no more tool batches: it answers at once
            middle, input_ = (1 + 2 * (turns // 2), "0") if turns else (3, "Paris")
            forked = await (
                await rp.continue_run(
                    ContinueRun(run_id=run.run_id, continue_from=middle, input=input_)
                )
            ).result()
            if turn % 5 == 0:
                await rp.fork_session(ForkSession(session_id=run.session_id))
            latencies.append((start, time.time()))
            if turns:
                ids[run.run_id], ids[forked.run_id] = (
                    await read(run.run_id),
                    await read(forked.run_id),
                )

    async with rp:
        began, sizes = time.time(), {}
        tasks = [asyncio.create_task(work()) for _ in range(workers)]
        print("minute  size (MB)  requests  p99 ms (no sweep)  p99 ms (during a sweep)")
        for minute in range(1, minutes + 1):
            await asyncio.sleep(began + 60 * minute - time.time())
            sizes[minute] = await size(url)
            window = [(s, e) for s, e in latencies if began + 60 * (minute - 1) <= s]
            during = [e - s for s, e in window if sweeps.overlaps(s, e)]
            quiet = [e - s for s, e in window if not sweeps.overlaps(s, e)]
            print(
                f"{minute:>6}  {sizes[minute] / 1e6:>9.2f}  {len(window):>8}"
                f"  {p99(quiet):>17}  {p99(during):>23}"
            )
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        kept = changed = 0
        for run_id, made_with in ids.items():
            try:
                now = await read(run_id)
            except NotFound:
                continue  # removed by the sweeps
            kept, changed = kept + 1, changed + (now != made_with)
        if turns:
            print(
                f"{len(ids)} runs and continues made, {kept} kept at the end, "
                f"{changed} of them not read back as made"
            )
    settled = [(s, e) for s, e in latencies if s >= began + 60 * 2]  # once sweeps remove
    during = [e - s for s, e in settled if sweeps.overlaps(s, e)]
    quiet = [e - s for s, e in settled if not sweeps.overlaps(s, e)]
    if len(during) > 1 and len(quiet) > 1:
        ratio = statistics.quantiles(during, n=100)[98] / statistics.quantiles(quiet, n=100)[98]
        print(
            f"minutes 3 to {minutes}: p99 {p99(during)} ms during sweeps ({len(during)} "
            f"requests), {p99(quiet)} ms without ({len(quiet)}): {ratio:.2f}x"
        )
    removed = sum((r for _, r in sweeps.done), Removed())
    seconds = sum(t.seconds for t, _ in sweeps.done)
    half = max(1, minutes // 2)
    print(
        f"size at minute {half}: {sizes[half] / 1e6:.2f} MB, at minute {minutes}: "
        f"{sizes[minutes] / 1e6:.2f} MB ({sizes[minutes] / sizes[half] - 1:+.1%})"
    )
    took = sorted(t.seconds for t, _ in sweeps.done) or [0.0]
    print(
        f"a sweep took {1e3 * statistics.median(took):.0f} ms (median), "
        f"{1e3 * took[-1]:.0f} ms at most"
    )
    print(
        f"{len(sweeps.done)} sweeps removed {removed.runs} runs, {removed.sessions} sessions "
        f"in {seconds:.2f}s: {1e3 * seconds / max(removed.runs, 1):.2f} ms per run removed, "
        f"{removed.size / max(removed.runs, 1):.0f} bytes of documents and "
        f"{removed.reclaimed / max(removed.runs, 1):.0f} bytes of file returned per run"
    )
    return changed == 0


def file_size(path: str) -> int:
    """A SQLite database's bytes on disk: its file and its WAL."""
    wal = path + "-wal"
    return os.path.getsize(path) + (os.path.getsize(wal) if os.path.exists(wal) else 0)


def p99(values: list[float]) -> str:
    if len(values) < 2:
        return "-"
    return f"{1e3 * statistics.quantiles(values, n=100)[98]:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", action="store_true", help="run on a temporary PostgreSQL")
    parser.add_argument("--minutes", type=int, default=10)
    parser.add_argument("--retain", type=float, default=60.0, help="seconds runs are kept")
    parser.add_argument("--sweep-seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=4, help="concurrent request loops")
    parser.add_argument("--rate", type=float, default=2.0, help="requests a second, steady")
    parser.add_argument("--turns", type=int, default=0, help="tool batches a run (0: the demo's)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, databases(args.postgres, Path(tmp)) as new:

        async def go() -> bool:
            url = await new("soak")
            return await soak(
                url,
                args.minutes,
                args.retain,
                args.sweep_seconds,
                args.workers,
                args.rate,
                args.turns,
            )

        if not asyncio.run(go()):
            raise SystemExit(1)


if __name__ == "__main__":
    main()
