"""Storage benchmark: how runs of 10 to 10,000 messages cost to build, list, cut and fork,
and what a session checkpoint and a rollback to it cost in a session holding such a run.

    .venv/bin/python contrib/bench/storage.py               # SQLite
    .venv/bin/python contrib/bench/storage.py --postgres    # a throwaway local PostgreSQL

Each run is made by the offline scripted model with no delay: one user message, four tool
batches whose width grows with the run's size, and a final answer, so every run has the
same five checkpoints and the figures show what the *transcript's* length costs. Bytes are
the msgspec documents handed to the database ("written") against those it holds at the
end ("stored"): a rewrite of the run per checkpoint would show as a ratio far above 1.
The run's event log is among both (each event is written once); "events/stored" is its
share of what is stored.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections.abc import Awaitable, Callable

from databases import NewDatabase, run_on_databases
from documents import WrittenDocuments, stored_bytes

from runpoint.agent import Agent, tool
from runpoint.model import ModelRequest, ModelResponse
from runpoint.plugins.scripted import ScriptedModel, call_id, turns_since_user
from runpoint.plugins.sql import SqlStorage
from runpoint.plugins.sql.schema import run_events
from runpoint.services import Runpoint
from runpoint.types import ToolCall

SIZES = (10, 100, 1_000, 10_000)
BATCHES = 4


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


async def measure(size: int, database: str) -> dict[str, float]:
    width = max(1, round((size - 2) / BATCHES - 1))  # 1 + 4 * (1 + width) + 1 messages
    agent = Agent(id="bench", model=wide_batches(width), tools=[echo])
    storage = SqlStorage(database)
    written = WrittenDocuments(storage.engine)
    async with Runpoint([agent], storage=storage) as rp:
        start = time.perf_counter()
        run = await (await rp.create_run("bench", "go")).result()
        build = time.perf_counter() - start
        stored = await stored_bytes(storage.engine)
        write_ratio = written.bytes / stored
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
            handle = await rp.continue_run(run.run_id, fork=True)
            fork_times.append(time.perf_counter() - start)
            await handle.result()
        fork_ms = 1000 * statistics.median(fork_times)

        return {
            "messages": run.message_count,
            "build_ms": build * 1000,
            "write_ratio": write_ratio,
            "event_share": event_share,
            "timeline_ms": 1000 * await median_seconds(lambda: rp.timeline(run.run_id), repeat),
            "snapshot_ms": 1000
            * await median_seconds(lambda: rp.snapshot(run.run_id, run.message_count // 2), repeat),
            "fork_ms": fork_ms,
            "session_ms": 1000 * await median_seconds(checkpoint_and_rollback, repeat),
        }


async def main(databases: NewDatabase) -> None:
    results = {size: await measure(size, await databases(f"bench_{size}")) for size in SIZES}
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


if __name__ == "__main__":
    run_on_databases(__doc__.splitlines()[0], main)
