"""Scale-out benchmark: concurrent runs from 1 and from 2 processes on one PostgreSQL.

    .venv/bin/python contrib/bench/scale.py [--runs 400] [--concurrency 16] [--warmup 200]
                                            [--model scripted|openai|openai-chat|anthropic]

Starts a throwaway PostgreSQL (durable settings: fsync on), then runs the same load from
one process, and from two processes at once: each run is the offline scripted model (no
delay), or a provider's through its official SDK against providers.py's vendor server (a
process of its own: its CPU is neither side's), answering with three tool batches. The
scripted model costs runpoint least, so it asks most of the database per runpoint CPU
second; a provider's run is the one users make. Each run writes 8 messages and 4 checkpoints in 5
transactions: the run with its input, then one per boundary. Each process first runs
`--warmup` runs uncounted, as a server that has been up a while has. Prints runs per
second, the ratio of the two, the median time of a checkpoint write (one transaction: the
run's state, its messages, the checkpoint row), the share of a run's time spent waiting on
the database, the CPU time a run costs in runpoint and in PostgreSQL with the cores busy
(which bound what 2 processes can reach on this machine), what a run asks of the database
(statements and round trips, counted by runpoint's side: see statements.py) and what the
server writes for it (WAL bytes; bytes its processes had the OS write, see pgserver.py),
the server's own count of each statement it executed and planned, and the WAL it wrote
(pg_stat_statements, which the server loads: its bookkeeping is in the server's CPU), and
what the database's busy backends were doing, sampled (were it serialising the runs, they
would wait on locks).
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
from typing import Any, NamedTuple

import pgserver
import providers
from databases import databases
from statements import Statements

from runpoint.core.types import (
    Checkpoint,
    KeyAnswer,
    Message,
    Run,
    RunEvent,
    Segment,
    Session,
    new_id,
)
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.sql.store import SqlStorage
from runpoint.seams.agent import Agent, tool

QUESTION = "Paris, Tokyo and Lagos"
MODELS = ["scripted", *providers.PROVIDERS]
STATEMENTS_SHOWN = 6  # of the server's, those that wrote the most WAL


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
        answering: KeyAnswer | None = None,
        events: Sequence[RunEvent] = (),
    ) -> None:
        start = time.perf_counter()
        await super().save(run, messages, cp, intents=intents, answering=answering, events=events)
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


def bench_agent(model: str) -> tuple[Agent, str]:
    """The agent of `model` and the question on which it makes three tool batches."""
    if model == "scripted":
        return Agent(id="bench", model="scripted:demo", tools=[get_population]), QUESTION
    return providers.agent(model), "calls: 3"


async def worker(
    database: str,
    runs: int,
    concurrency: int,
    *,
    model: str = "scripted",
    warmup: int = 0,
    on_your_marks: bool = False,
) -> dict[str, Any]:
    agent, question = bench_agent(model)
    storage = TimedStorage(database)
    sent = Statements(storage.db)
    async with Runpoint([agent], storage=storage) as rp:
        gate = asyncio.Semaphore(concurrency)

        async def one() -> float:
            async with gate:
                start = time.perf_counter()
                await (await rp.create_run(CreateRun(agent_id="bench", message=question))).result()
                return time.perf_counter() - start

        # steady state, as in a server that has been up a while: the connection pool
        # filled, its PostgreSQL backends past their first touches of shared memory
        await asyncio.gather(*(one() for _ in range(warmup)))
        storage.seconds, storage.checkpoint_writes = 0.0, []
        sent.reset()
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
        "statements": sent.statements,
        "round_trips": sent.round_trips,
    }


async def checkpoint_writes(database: str, count: int = 300) -> list[float]:
    """Checkpoint writes one after another, each in its own transaction, nothing else
    running: what one costs the database."""
    storage = SqlStorage(database)
    await storage.open()
    session = Session(session_id=new_id(), agent_id="bench")
    run_id = new_id()
    run = Run(
        run_id=run_id,
        session_id=session.session_id,
        agent_id="bench",
        segments=[Segment(run_id, 0)],
    )
    await storage.create_sessions([session], [run])
    times = []
    for index in range(1, count + 1):
        message = Message(role="tool", content="2.1M", tool_call_id=f"c{index}", tool_name="t")
        run.count_appended(index, None)
        checkpoint = Checkpoint(
            new_id(), run.run_id, run.session_id, index, "checkpoint", "tool-batch", run.status
        )
        start = time.perf_counter()
        await storage.save(run, [message], checkpoint)
        times.append(time.perf_counter() - start)
    await storage.close()
    return times


class Phase(NamedTuple):
    results: list[dict[str, Any]]  # the workers'
    wall: float  # seconds from the first one's runs' start to the last one's end
    # what the server spent from the runs' start to the workers' exit: CPU seconds, bytes
    # its processes wrote to disk (None: not readable), WAL bytes; what its backends did
    cpu: float
    disk: int | None
    wal: int
    states: Counter[str]
    executed: list[pgserver.Executed]


def phase(
    database: str, processes: int, runs: int, concurrency: int, warmup: int, model: str
) -> Phase:
    """Runs from `processes` processes at once (not counting start-up, warm-up and
    shut-down), and what the server spent on them."""
    postmaster = asyncio.run(pgserver.postmaster_pid(database))
    command = [sys.executable, __file__, "--worker", database]
    command += [str(runs), str(concurrency), str(warmup), model]
    started = [
        subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    for process in started:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    asyncio.run(pgserver.executed(database, reset=True))
    before = pgserver.cpu_seconds(postmaster)
    disk, wal = pgserver.write_bytes(postmaster), asyncio.run(pgserver.wal_position(database))
    stop = threading.Event()
    sampled: list[tuple[Counter[str], float]] = []
    sampler = threading.Thread(
        target=lambda: sampled.append(asyncio.run(pgserver.doing(database, stop)))
    )
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
    cpu = pgserver.cpu_seconds(postmaster) - before - sampler_cpu
    wal = asyncio.run(pgserver.wal_position(database)) - wal
    executed = asyncio.run(pgserver.executed(database))
    written = pgserver.write_bytes(postmaster)
    disk = None if disk is None or written is None else written - disk
    return Phase(results, wall, cpu, disk, wal, states, executed)


def main(runs: int, concurrency: int, warmup: int, model: str) -> None:
    settings = pgserver.STATEMENT_SETTINGS
    with tempfile.TemporaryDirectory() as tmp, databases(True, Path(tmp), settings=settings) as new:
        database = asyncio.run(new("scale"))
        asyncio.run(worker(database, 4, 4))  # migrate
        alone = asyncio.run(checkpoint_writes(database))
        single = phase(database, 1, runs, concurrency, warmup, model)
        double = phase(database, 2, runs, concurrency, warmup, model)

    one_rate = runs / single.wall
    two_rate = 2 * runs / double.wall  # from their common start to the last one's end
    loaded = [w for r in single.results + double.results for w in r["checkpoint_writes"]]
    print(
        f"model: {model}; runs per process: {runs} (after {warmup} to warm up), "
        f"{concurrency} at a time"
    )
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
    for label, measured in (("1 process", single), ("2 processes", double)):
        results = measured.results
        print(f"{label}:")
        share = sum(r["db_seconds"] for r in results) / sum(r["run_seconds"] for r in results)
        print(f"  share of run time awaiting the database: {100 * share:.0f}%")
        done = sum(r["runs"] for r in results)
        ours = sum(r["cpu_seconds"] for r in results)
        busy[label] = (ours + measured.cpu) / measured.wall
        print(
            f"  CPU per run: runpoint {1000 * ours / done:.2f} ms, PostgreSQL "
            f"{1000 * measured.cpu / done:.2f} ms ({measured.cpu / ours:.2f} of runpoint's; "
            f"target <= 0.33); {busy[label]:.2f} of {cores} cores busy"
        )
        sent = {key: sum(r[key] for r in results) / done for key in ("statements", "round_trips")}
        disk = "n/a" if measured.disk is None else f"{measured.disk / done:,.0f}"
        print(
            f"  per run: {sent['statements']:.2f} statements, {sent['round_trips']:.2f} round "
            f"trips; {measured.wal / done:,.0f} bytes of WAL; the server's write_bytes {disk} "
            "(the OS's count: see disk.py)"
        )
        plans = sum(e.plans for e in measured.executed)
        print(f"  the server's statements per run ({plans / done:.2f} planned), by WAL bytes:")
        for e in sorted(measured.executed, key=lambda e: -e.wal_bytes)[:STATEMENTS_SHOWN]:
            print(
                f"    {e.calls / done:5.2f} executed, {e.plans / done:5.2f} planned, "
                f"{e.wal_bytes / done:7,.0f} WAL bytes: {' '.join(e.query.split())[:60]}"
            )
        print("  PostgreSQL backends holding a statement or transaction, sampled:")
        for state, count in measured.states.most_common():
            print(f"    {100 * count / measured.states.total():5.1f}%  {state}")
    # at the same CPU per run, a second process can only add the cores the first left idle
    print(f"ratio the CPU allows: at most {cores / busy['1 process']:.2f}x")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        url, count, width, warmup = sys.argv[2], *map(int, sys.argv[3:6])
        model = sys.argv[6]
        report = asyncio.run(
            worker(url, count, width, model=model, warmup=warmup, on_your_marks=True)
        )
        print(json.dumps(report))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--runs", type=int, default=400, help="runs per process")
        parser.add_argument("--concurrency", type=int, default=16, help="runs at once")
        parser.add_argument("--warmup", type=int, default=200, help="runs before counting")
        parser.add_argument(
            "--model", choices=MODELS, default="scripted", help="a provider's, or none"
        )
        args = parser.parse_args()
        with contextlib.nullcontext() if args.model == "scripted" else providers.vendor_server():
            main(args.runs, args.concurrency, args.warmup, args.model)
