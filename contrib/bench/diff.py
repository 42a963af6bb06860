"""Branch benchmark: what a diff and a fan-out cost.

    .venv/bin/python contrib/bench/diff.py               # SQLite
    .venv/bin/python contrib/bench/diff.py --postgres    # a throwaway local PostgreSQL

Diff: two branches of 10,000 messages that part at message 9,990, against two of 20 that
part at message 10 (each branch a fork of one run, with 10 messages of its own). A diff
reads only what lies past the common ancestor, so both should cost about the same.

Fan-out: 8 runs forked at once from a checkpoint, against one run forked from it, each
taking `--turns` model turns of the scripted model with a `latency` of `--turn-seconds` (a
vendor's time to answer; 0 measures the CPU alone). The 8 run concurrently: with a
vendor's latency they end within about the time of one; with none, 8 runs are 8 times the
work of one on one event loop (and, on SQLite, one writer), whatever runs at once.

    .venv/bin/python contrib/bench/diff.py --turn-seconds 0    # the CPU alone
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from databases import NewDatabase, databases
from storage import median_seconds

from runpoint.core.types import Message, Run, RunStatus, Segment, Session, ToolCall
from runpoint.facade import ContinueRun, CreateRun, FanOut, Runpoint
from runpoint.plugins.scripted import ScriptedModel, call_id, turns_since_user
from runpoint.runs.continuation import Branch
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import ModelRequest, ModelResponse

FAN_OUT = 8


@tool(effect="read")
async def echo(value: str) -> str:
    """Return the value."""
    return value


def transcript(start: int, end: int, label: str) -> list[Message]:
    """Messages `start` to `end`: a system and a user message, then tool turns and their
    results (so that every even boundary is whole)."""
    messages = []
    for i in range(start, end):
        if i < 2:
            messages.append(Message(role="system" if i == 0 else "user", content="go"))
        elif i % 2 == 0:
            call = ToolCall(f"call_{i}", "echo", {"value": f"{label} {i}"})
            messages.append(Message(role="assistant", content=f"{label} {i}", tool_calls=[call]))
        else:
            result = Message(role="tool", content=f"{label} {i}", tool_call_id=f"call_{i - 1}")
            messages.append(result)
    return messages


async def branches(rp: Runpoint, split: int, length: int) -> tuple[str, str]:
    """A run of `split` messages, and two forks of it at its end with `length - split`
    messages of their own each (written through the storage, as the run loop would)."""
    session = Session(session_id=f"s{split}", agent_id="bench")
    base = Run(
        run_id=f"base{split}",
        session_id=session.session_id,
        agent_id="bench",
        status=RunStatus.COMPLETED,
        segments=[Segment(f"base{split}", 0)],
        message_count=split,
    )
    await rp.storage.create_sessions([session], [base], {base.run_id: transcript(0, split, "base")})
    forks = [
        Run(
            run_id=f"{label}{split}",
            session_id=session.session_id,
            agent_id="bench",
            status=RunStatus.COMPLETED,
            segments=[Segment(base.run_id, 0, split), Segment(f"{label}{split}", split)],
            message_count=length,
            forked_from_run_id=base.run_id,
            forked_from_message_index=split,
        )
        for label in ("a", "b")
    ]
    await rp.storage.create_runs(
        forks, {f.run_id: transcript(split, length, f.run_id) for f in forks}
    )
    return forks[0].run_id, forks[1].run_id


async def median_ms(action: Callable[[], Awaitable[object]], repeat: int) -> float:
    return 1000 * await median_seconds(action, repeat)


async def measure_diff(rp: Runpoint, split: int, length: int, repeat: int) -> float:
    a, b = await branches(rp, split, length)
    found = await rp.diff(a, other_run_id=b)
    assert found.common_index == split and len(found.added) == len(found.removed) == length - split
    return await median_ms(lambda: rp.diff(a, other_run_id=b), repeat)


def slow_batches(turns: int, seconds: float) -> ScriptedModel:
    """A model that calls `echo` until its last turn, answering after `seconds`."""

    def respond(request: ModelRequest) -> ModelResponse:
        turn = turns_since_user(request.messages)
        if turn + 1 >= turns:
            return ModelResponse(content="done")
        return ModelResponse(
            content=f"turn {turn + 1}",
            tool_calls=[ToolCall(call_id(request), "echo", {"value": str(turn)})],
        )

    return ScriptedModel(respond, latency=seconds)


async def measure_fan_out(rp: Runpoint, repeat: int) -> tuple[float, float]:
    """The median milliseconds until one fork, and until all of a fan-out of 8, ended."""
    source = await (await rp.create_run(CreateRun(agent_id="worker", message="go"))).result()

    async def one() -> None:
        handle = await rp.continue_run(
            ContinueRun(run_id=source.run_id, continue_from=1, fork=True)
        )
        assert (await handle.result()).status is RunStatus.COMPLETED

    async def eight() -> None:
        handles = await rp.fan_out(
            FanOut(run_id=source.run_id, branches=[Branch()] * FAN_OUT, continue_from=1)
        )
        runs = await asyncio.gather(*(h.result() for h in handles))
        assert all(r.status is RunStatus.COMPLETED for r in runs)

    return await median_ms(one, repeat), await median_ms(eight, repeat)


async def main(
    new_database: NewDatabase, turns: int, seconds: float, repeat: int, fan_out_repeat: int
) -> None:
    bench = Agent(id="bench", model="scripted:echo", tools=[echo])
    worker = Agent(id="worker", model=slow_batches(turns, seconds), tools=[echo])
    async with Runpoint([bench, worker], database=await new_database("bench_diff")) as rp:
        small = await measure_diff(rp, 10, 20, repeat)
        large = await measure_diff(rp, 9_990, 10_000, repeat)
        one, eight = await measure_fan_out(rp, fan_out_repeat)
    print(f"{'diff':<44} {'median ms':>10}")
    print(f"{'two 20-message branches parting at 10':<44} {small:>10.2f}")
    print(f"{'two 10,000-message branches parting at 9,990':<44} {large:>10.2f}")
    print(f"diff 10,000 / 20 messages: {large / small:.2f}x (target <= 2)")
    print()
    print(f"fan-out, {turns} model turns a run, {seconds:g} s a turn   median ms")
    print(f"{'one fork':<44} {one:>10.1f}")
    print(f"{f'{FAN_OUT} forks at once':<44} {eight:>10.1f}")
    print(f"fan-out of {FAN_OUT} / one run: {eight / one:.2f}x (target <= 2)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", action="store_true", help="run on a temporary PostgreSQL")
    parser.add_argument("--turns", type=int, default=4, help="model turns of each fan-out run")
    parser.add_argument("--turn-seconds", type=float, default=0.2, help="a model turn's latency")
    parser.add_argument("--repeat", type=int, default=200, help="diffs timed per size")
    parser.add_argument("--fan-out-repeat", type=int, default=7, help="fan-outs timed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, databases(args.postgres, Path(tmp)) as new:
        run = main(new, args.turns, args.turn_seconds, args.repeat, args.fan_out_repeat)
        asyncio.run(run)
