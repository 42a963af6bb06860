"""Scale-out benchmark: concurrent runs from 1 and from 2 processes on one PostgreSQL.

    .venv/bin/python contrib/bench/scale.py [--runs 400] [--concurrency 16] [--warmup 200]

Starts a throwaway PostgreSQL (durable settings: fsync on), then runs the same load from
one process, and from two processes at once: each run is the offline scripted model (no
delay) answering with three tool batches, so it writes 8 messages and 4 checkpoints in 5
transactions: the run with its input, then one per boundary. Each process first runs
`--warmup` runs uncounted, as a server that has been up a while has. Prints runs per
second, the ratio of the two, the median time of a checkpoint write (one transaction: the
run's state, its messages, the checkpoint row), the share of a run's time spent waiting on
the database, the CPU time a run costs in runpoint and in PostgreSQL with the cores busy
(which bound what 2 processes can reach on this machine), and what the database's busy
backends were doing, sampled (were it serialising the runs, they would wait on locks).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
from databases import databases

from runpoint.agent import Agent, tool
from runpoint.plugins.sql import SqlStorage
from runpoint.services import Runpoint
from runpoint.types import Checkpoint, Message, Run, RunEvent, Segment, Session, new_id

QUESTION = "Paris, Tokyo and Lagos"


@tool(effect="read")
async def get_population(city: str) -> str:
    """Look up a city's population (a read: no durable record per call)."""
    return "many"


class TimedStorage(SqlStorage):
    """Counts the time runs spend awaiting the database."""

    def __init__(self, url: str) -> None:
        super().__init__(url, pool_size=20)
        self.seconds = 0.0
        self.checkpoint_writes: list[float] = []

    async def save(
        self,
        run: Run,
        messages: Sequence[Message],
        cp: Checkpoint | None,
        *,
        intents: Sequence[str] = (),
        events: Sequence[RunEvent] = (),
    ) -> None:
        start = time.perf_counter()
        await super().save(run, messages, cp, intents=intents, events=events)
        took = time.perf_counter() - start
        self.seconds += took
        if cp is not None:
            self.checkpoint_writes.append(took)

    async def append_events(self, *args: Any, **kwargs: Any) -> bool:
        """A run's events written between its boundaries."""
        start = time.perf_counter()
        try:
            return await super().append_events(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    async def read_messages(self, *args: Any, **kwargs: Any) -> list[Message]:
        start = time.perf_counter()
        try:
            return await super().read_messages(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start

    async def create_sessions(self, *args: Any, **kwargs: Any) -> None:
        """A run's birth (each run here starts a session): its row, and its input."""
        start = time.perf_counter()
        try:
            await super().create_sessions(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


async def worker(
    database: str, runs: int, concurrency: int, *, warmup: int = 0, on_your_marks: bool = False
) -> dict[str, Any]:
    agent = Agent(id="bench", model="scripted:demo", tools=[get_population])
    storage = TimedStorage(database)
    async with Runpoint([agent], storage=storage) as rp:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> float:
            async with gate:
                start = time.perf_counter()
                await (await rp.create_run("bench", QUESTION)).result()
                return time.perf_counter() - start

        # steady state, as in a server that has been up a while: the connection pool
        # filled, its PostgreSQL backends past their first touches of shared memory
        await asyncio.gather(*(one() for _ in range(warmup)))
        storage.seconds, storage.checkpoint_writes = 0.0, []
        if on_your_marks:  # started up: the runs start when every worker is ready
            print("ready", flush=True)
            sys.stdin.readline()
        started_at, cpu = time.time(), time.process_time()
        run_seconds = sum(await asyncio.gather(*(one() for _ in range(runs))))
        ended_at, cpu = time.time(), time.process_time() - cpu
    return {
        "runs": runs,
        "started_at": started_at,  # wall clock: comparable between the workers
        "ended_at": ended_at,
        "cpu_seconds": cpu,
        "db_seconds": storage.seconds,
        "run_seconds": run_seconds,
        "checkpoint_writes": storage.checkpoint_writes,
    }


async def checkpoint_writes(database: str, count: int = 300) -> list[float]:
    """Checkpoint writes one after another, each in its own transaction, nothing else
    running: what one costs the database."""
    storage = SqlStorage(database)
    await storage.open()
    session = Session(session_id=new_id(), agent_id="bench")
    run = Run(run_id=new_id(), session_id=session.session_id, agent_id="bench")
    run.segments = [Segment(run.run_id, 0)]
    await storage.create_sessions([session], [run])
    times = []
    for index in range(1, count + 1):
        message = Message(role="tool", content="2.1M", tool_call_id=f"c{index}", tool_name="t")
        run.message_count = index
        checkpoint = Checkpoint(
            new_id(), run.run_id, run.session_id, index, "checkpoint", "tool-batch", run.status
        )
        start = time.perf_counter()
        await storage.save(run, [message], checkpoint)
        times.append(time.perf_counter() - start)
    await storage.close()
    return times


def phase(
    database: str, processes: int, runs: int, concurrency: int, warmup: int
) -> tuple[list[dict[str, Any]], float, float, Counter[str]]:
    """The workers' results, the seconds from the first one's start to the last one's end
    (of their runs: not counting start-up, warm-up and shut-down), the CPU seconds
    PostgreSQL spent from their start to their exit, and what its backends were doing."""
    postmaster = asyncio.run(postmaster_pid(database))
    command = [sys.executable, __file__, "--worker", database]
    command += [str(runs), str(concurrency), str(warmup)]
    started = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    for process in started:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    before = postgres_cpu(postmaster)
    stop = threading.Event()
    sampled: list[tuple[Counter[str], float]] = []
    sampler = threading.Thread(target=lambda: sampled.append(asyncio.run(doing(database, stop))))
    sampler.start()
    for process in started:  # all of them, before waiting for any
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    results = [json.loads(process.communicate()[0]) for process in started]
    stop.set()
    sampler.join()
    ((states, sampler_cpu),) = sampled
    wall = max(r["ended_at"] for r in results) - min(r["started_at"] for r in results)
    time.sleep(0.2)  # the workers' backends have exited: their time is the postmaster's
    return results, wall, postgres_cpu(postmaster) - before - sampler_cpu, states


# What PostgreSQL's backends are doing while they hold a statement or a transaction,
# sampled: if the database serialised the runs, they would be waiting on locks.
_BUSY_BACKENDS = """
SELECT wait_event_type, wait_event FROM pg_stat_activity
WHERE datname = current_database() AND backend_type = 'client backend'
  AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')
"""


async def doing(database: str, stop: threading.Event) -> tuple[Counter[str], float]:
    """Samples of what busy backends do, every 20 ms until `stop`, and the CPU seconds
    the sampling cost PostgreSQL (left out of the runs' share)."""
    connection = await asyncpg.connect(database)
    own = await connection.fetchval("SELECT pg_backend_pid()")
    states: Counter[str] = Counter()
    try:
        while not stop.is_set():
            for row in await connection.fetch(_BUSY_BACKENDS):
                states[_state(row["wait_event_type"], row["wait_event"])] += 1
            await asyncio.sleep(0.02)
        ticks = sum(int(f) for f in _stat(own)[11:13])
    finally:
        await connection.close()
    return states, ticks / os.sysconf("SC_CLK_TCK")


def _state(wait_type: str | None, wait_event: str | None) -> str:
    if wait_type is None:
        return "executing"
    if wait_event == "ClientRead":
        return "waiting for runpoint (mid-transaction)"
    if wait_type == "Lock":
        return "waiting for a lock on a row or table"
    if wait_event is not None and wait_event.startswith("WAL"):
        return "committing (writing and flushing the WAL)"
    return f"other: {wait_type} {wait_event}"


async def postmaster_pid(database: str) -> int:
    connection = await asyncpg.connect(database)
    try:  # the parent of this connection's backend, while it lives
        return int(_stat(await connection.fetchval("SELECT pg_backend_pid()"))[1])
    finally:
        await connection.close()


def postgres_cpu(postmaster: int) -> float:
    """CPU seconds of the server: the postmaster, its reaped children and its live ones."""
    ticks = sum(int(f) for f in _stat(postmaster)[11:15])
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = _stat(int(entry))
                if int(stat[1]) == postmaster:
                    ticks += int(stat[11]) + int(stat[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat from the field after the command: [state, ppid, ...]."""
    with open(f"/proc/{pid}/stat") as file:
        return file.read().rsplit(")", 1)[1].split()


def main(runs: int, concurrency: int, warmup: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, databases(True, Path(tmp)) as new:
        database = asyncio.run(new("scale"))
        asyncio.run(worker(database, 4, 4))  # migrate
        alone = asyncio.run(checkpoint_writes(database))
        single = phase(database, 1, runs, concurrency, warmup)
        double = phase(database, 2, runs, concurrency, warmup)

    one_rate = runs / single[1]
    two_rate = 2 * runs / double[1]  # from their common start to the last one's end
    loaded = [w for r in single[0] + double[0] for w in r["checkpoint_writes"]]
    print(f"runs per process: {runs} (after {warmup} to warm up), {concurrency} at a time")
    print(f"1 process : {one_rate:8.1f} runs/s")
    print(f"2 processes: {two_rate:8.1f} runs/s")
    print(f"ratio 2/1  : {two_rate / one_rate:8.2f}x (target >= 1.5)")
    for label, writes in (("alone", alone), ("under the load above", loaded)):
        print(
            f"checkpoint write on PostgreSQL, {label}: median "
            f"{1000 * statistics.median(writes):.2f} ms, p99 "
            f"{1000 * statistics.quantiles(writes, n=100)[98]:.2f} ms over {len(writes)} writes"
        )
    print("(target: median <= 2 ms)")
    cores = os.cpu_count() or 1
    busy = {}
    for label, (results, wall, pg, states) in (("1 process", single), ("2 processes", double)):
        print(f"{label}:")
        share = sum(r["db_seconds"] for r in results) / sum(r["run_seconds"] for r in results)
        print(f"  share of run time awaiting the database: {100 * share:.0f}%")
        done = sum(r["runs"] for r in results)
        ours = sum(r["cpu_seconds"] for r in results)
        busy[label] = (ours + pg) / wall
        print(
            f"  CPU per run: runpoint {1000 * ours / done:.2f} ms, PostgreSQL "
            f"{1000 * pg / done:.2f} ms; {busy[label]:.2f} of {cores} cores busy"
        )
        print("  PostgreSQL backends holding a statement or transaction, sampled:")
        for state, count in states.most_common():
            print(f"    {100 * count / states.total():5.1f}%  {state}")
    # at the same CPU per run, a second process can only add the cores the first left idle
    print(f"ratio the CPU allows: at most {cores / busy['1 process']:.2f}x")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        url, count, width, warmup = sys.argv[2], *map(int, sys.argv[3:6])
        report = asyncio.run(worker(url, count, width, warmup=warmup, on_your_marks=True))
        print(json.dumps(report))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--runs", type=int, default=400, help="runs per process")
        parser.add_argument("--concurrency", type=int, default=16, help="runs at once")
        parser.add_argument("--warmup", type=int, default=200, help="runs before counting")
        args = parser.parse_args()
        main(args.runs, args.concurrency, args.warmup)
