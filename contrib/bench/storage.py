"""Storage benchmark: how runs of 10 to 10,000 messages cost to build, list, cut and fork,
and what a session checkpoint and a rollback to it cost in a session holding such a run.

    .venv/bin/python contrib/bench/storage.py               # SQLite
    .venv/bin/python contrib/bench/storage.py --postgres    # a throwaway local PostgreSQL

Each run is made by the offline scripted model with no delay: one user message, four tool
batches whose width grows with the run's size, and a final answer, so every run has the
same five checkpoints and the figures show what the *transcript's* length costs.

Bytes, per run of each size (built several times where it is small): the msgspec documents
handed to the database ("written") against those it holds at the end ("stored"), where a
rewrite of the run per checkpoint would show as a ratio far above 1; and what the disk was
asked to write for them (see disk.py): on SQLite this process's writes, its WAL and, at
checkpoints, its database file; on PostgreSQL the server's writes and its WAL. A "write" is
one transaction of the run: its birth with its input, and each boundary it saves. The
run's event log is among the documents written and stored (each event is written once);
"events/stored" is its share of what is stored. On SQLite the benchmark then says what
one write of a 10-message run puts in the WAL, page by page (see walpages.py). Last, runs
of 10 messages 16 at a time, whose writes come together: runs per second, what the disk
was asked to write per byte stored, and on SQLite the commits per run.

Like `runpoint serve`, the benchmark freezes what its start-up made (adapters/serving.py:
`settle`): else a long build's full collections walk those 100,000 objects each time.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import walpages
from databases import NewDatabase, run_on_databases
from disk import written
from documents import WrittenDocuments, stored_bytes
from sqlalchemy import event
from sqlalchemy.engine import make_url

from runpoint.adapters.serving import settle
from runpoint.core.types import ToolCall
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel, call_id, turns_since_user
from runpoint.plugins.sql.schema import run_events
from runpoint.plugins.sql.store import SqlStorage
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import ModelRequest, ModelResponse

SIZES = (10, 100, 1_000, 10_000)
BATCHES = 4
RUNS_FOR_BYTES = 1_000  # messages built per size for the byte figures (one run at least)


@tool(effect="read")
async def echo(value: str) -> str:
    """Return the value (async: a sync tool would measure the thread pool instead; a
    read: a side effect would add a durable record per call, measured in scale.py)."""
    return value


def wide_batches(width: int) -> ScriptedModel:
    def respond(request: ModelRequest) -> ModelResponse:
        turn = turns_since_user(request.messages)
        if turn == BATCHES:
            return ModelResponse(content="done")
        calls = [ToolCall(call_id(request, i), "echo", {"value": f"v{i}"}) for i in range(width)]
        return ModelResponse(content=f"batch {turn + 1}", tool_calls=calls)

    return ScriptedModel(respond)


async def median_seconds(action: Callable[[], Awaitable[object]], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class CountedStorage(SqlStorage):
    """Counts a run's writes: its birth (each run here starts a session), its saves."""

    writes = 0

    async def create_sessions(self, *args: Any, **kwargs: Any) -> None:
        self.writes += 1
        await super().create_sessions(*args, **kwargs)

    async def save(self, *args: Any, **kwargs: Any) -> None:
        self.writes += 1
        await super().save(*args, **kwargs)


def agent_of_size(size: int) -> Agent:
    width = max(1, round((size - 2) / BATCHES - 1))  # 1 + 4 * (1 + width) + 1 messages
    return Agent(id="bench", model=wide_batches(width), tools=[echo])


async def measure(size: int, database: str) -> dict[str, float]:
    storage = CountedStorage(database)
    documents = WrittenDocuments(storage.engine)
    async with Runpoint([agent_of_size(size)], storage=storage) as rp:
        settle()
        copies = max(1, RUNS_FOR_BYTES // size)
        before, builds = await written(database), []
        for _ in range(copies):
            start = time.perf_counter()
            run = await (await rp.create_run(CreateRun(agent_id="bench", message="go"))).result()
            builds.append(time.perf_counter() - start)
        disk, writes = await written(database) - before, storage.writes
        stored = await stored_bytes(storage.engine)
        write_ratio = documents.bytes / stored
        event_share = await stored_bytes(storage.engine, [run_events.c.data]) / stored
        repeat = 200 if size <= 1_000 else 50

        # a session whose one run is this one (copy-on-write), checkpointed and rolled back
        # (before the forks below add runs to the run's session)
        _, [session] = await rp.session_checkpoints.fork(run.session_id)

        async def checkpoint_and_rollback() -> None:
            taken = await rp.session_checkpoints.create(session.session_id)
            await rp.session_checkpoints.rollback(session.session_id, taken.checkpoint_id)

        fork_times = []
        for _ in range(repeat):  # the fork itself; its (empty) execution is not timed
            start = time.perf_counter()
            handle = await rp.continue_run(ContinueRun(run_id=run.run_id, fork=True))
            fork_times.append(time.perf_counter() - start)
            await handle.result()
        fork_ms = 1000 * statistics.median(fork_times)

        return {
            "messages": run.message_count,
            "build_ms": 1000 * statistics.median(builds),
            "write_ratio": write_ratio,
            "event_share": event_share,
            "writes": writes / copies,
            "stored": stored / copies,
            **{name: math.nan if n is None else n / copies for name, n in disk._asdict().items()},
            "timeline_ms": 1000 * await median_seconds(lambda: rp.timeline(run.run_id), repeat),
            "snapshot_ms": 1000
            * await median_seconds(lambda: rp.snapshot(run.run_id, run.message_count // 2), repeat),
            "fork_ms": fork_ms,
            "session_ms": 1000 * await median_seconds(checkpoint_and_rollback, repeat),
        }


async def at_once(database: str, runs: int = 160, width: int = 16) -> dict[str, float]:
    """Runs of the smallest size, `width` at a time: what the disk was asked to write per
    byte stored, and how many transactions SQLite committed per run, when writes of
    several runs come together."""
    storage = SqlStorage(database)
    committed = [0]

    def count(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        committed[0] += sql == "COMMIT"

    event.listen(storage.engine.sync_engine, "before_cursor_execute", count)
    async with Runpoint([agent_of_size(SIZES[0])], storage=storage) as rp:
        gate = asyncio.Semaphore(width)

        async def one() -> None:
            async with gate:
                await (await rp.create_run(CreateRun(agent_id="bench", message="go"))).result()

        before, committed[0], start = await written(database), 0, time.perf_counter()
        await asyncio.gather(*(one() for _ in range(runs)))
        seconds, commits = time.perf_counter() - start, committed[0]
        disk = (await written(database) - before).disk
        stored = await stored_bytes(storage.engine)
    return {
        "runs_per_second": runs / seconds,
        "commits": commits / runs,
        "disk": math.nan if disk is None else disk / stored,
    }


async def commit_pages(database: str, runs: int = 20) -> walpages.Commits:
    """The pages each write of `runs` runs of the smallest size put in SQLite's WAL."""
    storage = SqlStorage(database)
    walpages.hold_checkpoints(storage.engine)
    async with Runpoint([agent_of_size(SIZES[0])], storage=storage) as rp:
        await written(database)  # the WAL starts over
        for _ in range(runs):
            await (await rp.create_run(CreateRun(agent_id="bench", message="go"))).result()
        return walpages.commits(_path(database))


def _path(database: str) -> str:
    path = make_url(database).database
    assert path is not None
    return path


async def main(databases: NewDatabase) -> None:
    results = {size: await measure(size, await databases(f"bench_{size}")) for size in SIZES}
    on_sqlite = make_url(await databases("bench_pages")).get_backend_name() == "sqlite"
    print(
        f"{'messages':>9} {'build ms':>9} {'written/stored':>15} {'events/stored':>14} "
        f"{'timeline ms':>12} "
        f"{'snapshot@mid ms':>16} {'fork@end ms':>12} {'session ckpt+rollback ms':>25}"
    )
    for r in results.values():
        print(
            f"{r['messages']:>9.0f} {r['build_ms']:>9.1f} {r['write_ratio']:>15.2f} "
            f"{r['event_share']:>14.2f} "
            f"{r['timeline_ms']:>12.2f} {r['snapshot_ms']:>16.2f} {r['fork_ms']:>12.2f} "
            f"{r['session_ms']:>25.2f}"
        )
    small, large = results[SIZES[0]], results[SIZES[-1]]
    print()
    print(
        f"timeline 10,000 / 10 messages: {large['timeline_ms'] / small['timeline_ms']:.2f}x "
        "(target <= 2)"
    )
    print(
        f"fork     10,000 / 10 messages: {large['fork_ms'] / small['fork_ms']:.2f}x (target <= 2)"
    )
    print(
        f"session checkpoint + rollback 10,000 / 10 messages: "
        f"{large['session_ms'] / small['session_ms']:.2f}x (target <= 2)"
    )
    for a, b in itertools.pairwise(SIZES):
        ratio = results[b]["build_ms"] / results[a]["build_ms"]
        print(f"build {b:>6,} / {a:>5,} messages: {ratio:.2f}x (target <= 12 for 10x)")
    worst = max(r["write_ratio"] for r in results.values())
    print(f"worst written/stored: {worst:.2f} (target <= 1.5)")
    print()
    print_bytes(results, "this process" if on_sqlite else "the server")
    together = await at_once(await databases("bench_at_once"))
    print(
        f"runs of {SIZES[0]} messages, 16 at a time: {together['runs_per_second']:.1f} runs/s, "
        f"disk/documents {together['disk']:.2f}"
        + (f", {together['commits']:.2f} commits per run" if on_sqlite else "")
    )
    if on_sqlite:
        database = await databases("bench_pages")
        print_pages(await commit_pages(database), _path(database))


def print_bytes(results: dict[int, dict[str, float]], whose: str) -> None:
    with_wal = not any(math.isnan(r["wal"]) for r in results.values())
    print(f"bytes per run: documents stored, and what the OS was asked to write ({whose})")
    wal_header = f" {'WAL':>10} {'WAL/documents':>14}" if with_wal else ""
    print(
        f"{'messages':>9} {'writes':>7} {'documents':>10} {'disk':>10} {'disk/write':>11} "
        f"{'disk/documents':>15}{wal_header}"
    )
    for r in results.values():
        wal = f" {r['wal']:>10,.0f} {r['wal'] / r['stored']:>14.2f}" if with_wal else ""
        print(
            f"{r['messages']:>9.0f} {r['writes']:>7.1f} {r['stored']:>10,.0f} {r['disk']:>10,.0f} "
            f"{r['disk'] / r['writes']:>11,.0f} {r['disk'] / r['stored']:>15.2f}{wal}"
        )
    worst = max(r["disk"] / r["stored"] for r in results.values())
    print(f"worst disk/documents: {worst:.2f} (issue 18's target: <= 1.5)")


def print_pages(commits: walpages.Commits, path: str) -> None:
    count = sum(len(pages) for pages in commits.pages)
    print()
    print(
        f"one write of a {SIZES[0]}-message run in SQLite's WAL, over {len(commits.pages)} "
        f"writes: {count / len(commits.pages):.2f} pages of {commits.page_size:,} bytes, "
        f"{commits.wal_bytes / len(commits.pages):,.0f} bytes; pages per write by owner:"
    )
    for owner, pages in commits.by_owner(path).most_common():
        print(f"  {pages:5.2f}  {owner}")


if __name__ == "__main__":
    run_on_databases(__doc__.splitlines()[0], main)
