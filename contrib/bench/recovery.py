"""Recovery benchmark: how soon runs whose process was killed are resumed, and at what cost.

    .venv/bin/python contrib/bench/recovery.py [--runs 16] [--rounds 2] [--lease 1.0]

On PostgreSQL (a throwaway server; runs go through the run queue) and on SQLite, each
round starts a process that accepts and executes background runs of the fault test's
`booker` agent (six side-effecting tool batches each) while a second process (this one)
runs, and kills the first with SIGKILL once they are all under way. Per interrupted run it
measures lease expiry -> resumed and kill -> resumed (resumed: the surviving process
started executing it), then lets every run finish, deciding calls left in doubt as an
operator would (from the outside count of bookings), and prints the medians and maxima,
the side-effecting calls executed twice, the calls that had finished before the kill and
ran again, and the runs lost (not COMPLETED, or with a transcript not whole).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from databases import databases

from runpoint import hookimpl
from runpoint.core.types import Decision, Run, RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.seams.host import PluginHost
from tests.faults.app import agents, booked

CITIES = "Paris Tokyo Lagos Kyoto Lima Cairo"
IN_FLIGHT = (RunStatus.PENDING, RunStatus.RUNNING)


async def victim(database: str, runs: int, lease: float) -> None:
    """The process to kill: it accepts the runs, and prints `ready` once it executes
    every one of them."""
    async with Runpoint(agents, database=database, lease_seconds=lease) as rp:
        handles = await asyncio.gather(
            *(
                rp.create_run(
                    CreateRun(agent_id="booker", message=f"job-{i}: {CITIES}", background=True)
                )
                for i in range(runs)
            )
        )
        for handle in handles:
            print(handle.run.run_id, flush=True)
        for handle in handles:
            while (await rp.get_run(handle.run.run_id)).run.status is RunStatus.PENDING:  # noqa: ASYNC110 (polls the database)
                await asyncio.sleep(0.01)
        print("ready", flush=True)
        await asyncio.Event().wait()


@dataclass
class Resumptions:
    """When the surviving process first started executing each run."""

    at: dict[str, float] = field(default_factory=dict)

    @hookimpl
    def runpoint_run_started(self, run: Run) -> None:
        self.at.setdefault(run.run_id, time.time())


@dataclass
class Round:
    interrupted: int = 0
    expiry_to_resumed: list[float] = field(default_factory=list)
    kill_to_resumed: list[float] = field(default_factory=list)
    twice: int = 0  # side-effecting calls executed more than once
    finished_again: int = 0  # calls whose result was durable at the kill, executed again
    in_doubt: int = 0  # calls under way at the kill, decided by the operator
    lost: int = 0


async def one_round(
    database: str, runs: int, lease: float, counter: Path, rng: random.Random
) -> Round:
    bookings(counter, clear=True)
    resumed = Resumptions()
    figures = Round()
    host = PluginHost([resumed])
    # it takes no jobs: every run is the victim's, and is resumed by the lease watch
    survivor = Runpoint(
        agents, database=database, host=host, lease_seconds=lease, execute_queued=False
    )
    await survivor.open()
    child = await asyncio.create_subprocess_exec(
        *(sys.executable, __file__, "--victim", database, str(runs), str(lease)),
        stdout=asyncio.subprocess.PIPE,
        env=os.environ | {"FAULTS_COUNTER": str(counter)},
    )
    assert child.stdout is not None
    run_ids = []
    while (line := (await child.stdout.readline()).decode().strip()) != "ready":
        assert line, "the victim exited"
        run_ids.append(line)
    async with survivor as rp:
        await asyncio.sleep(rng.uniform(0.05, 0.2))
        child.kill()
        killed_at = time.time()
        await child.wait()
        at_kill = {run_id: await rp.get_run(run_id) for run_id in run_ids}
        finished = {
            m.tool_call_id for d in at_kill.values() for m in d.messages if m.role == "tool"
        }
        interrupted = [i for i, d in at_kill.items() if d.run.status in IN_FLIGHT]
        figures.interrupted = len(interrupted)

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            details = [await rp.get_run(run_id) for run_id in run_ids]
            if all(d.run.status is RunStatus.COMPLETED for d in details):
                break
            for detail in details:
                if detail.run.status is RunStatus.PAUSED:
                    figures.in_doubt += await decide(rp, detail.run, counter)
            await asyncio.sleep(0.05)

        for run_id in interrupted:
            expired = at_kill[run_id].run.lease_expires_at or killed_at
            figures.expiry_to_resumed.append(resumed.at[run_id] - expired)
            figures.kill_to_resumed.append(resumed.at[run_id] - killed_at)
        made = bookings(counter)
        figures.twice = sum(n - 1 for n in made.values() if n > 1)
        for run_id in run_ids:
            detail = await rp.get_run(run_id)
            calls = [t for t in detail.tools if t.result is not None]
            ids = [m.id for m in detail.messages]
            whole = len(set(ids)) == len(ids) and len(calls) == len(CITIES.split())
            if detail.run.status is not RunStatus.COMPLETED or not whole:
                figures.lost += 1
            for call in calls:
                booking = f"{call.tool_args['job']} {call.tool_args['city']}"
                if call.tool_call_id in finished and made[booking] > 1:
                    figures.finished_again += 1
    return figures


async def decide(rp: Runpoint, run: Run, counter: Path) -> int:
    """Decide a paused run's calls in doubt from the outside record: supply the result
    of a booking that happened, run one that did not."""
    done = bookings(counter)
    decisions: dict[str, Decision] = {}
    for call in (await rp.get_run(run.run_id)).tools:
        if call.in_doubt:
            job, city = call.tool_args["job"], call.tool_args["city"]
            decisions[call.tool_call_id] = booked(job, city) if f"{job} {city}" in done else True
    await (await rp.continue_run(ContinueRun(run_id=run.run_id, tools=decisions))).result()
    return len(decisions)


def bookings(counter: Path, *, clear: bool = False) -> collections.Counter[str]:
    """The bookings made so far, counted outside the servers (one line each)."""
    if clear:
        counter.write_text("")
    return collections.Counter(counter.read_text().splitlines())


def report(label: str, rounds: list[Round], runs: int, lease: float) -> None:
    expiry = [s for r in rounds for s in r.expiry_to_resumed]
    kill = [s for r in rounds for s in r.kill_to_resumed]
    interrupted = sum(r.interrupted for r in rounds)
    print(f"{label}: {len(rounds)} kills, {runs} runs each, lease {lease:g} s")
    print(f"  runs interrupted by the kills: {interrupted} of {len(rounds) * runs}")
    if expiry:
        print(
            f"  lease expiry -> resumed: median {1000 * statistics.median(expiry):6.0f} ms,"
            f" max {1000 * max(expiry):6.0f} ms"
        )
        print(
            f"  kill -> resumed:         median {1000 * statistics.median(kill):6.0f} ms,"
            f" max {1000 * max(kill):6.0f} ms"
        )
    print(
        f"  side-effecting calls executed twice: {sum(r.twice for r in rounds)};"
        f" finished calls executed again: {sum(r.finished_again for r in rounds)};"
        f" calls in doubt decided by the operator: {sum(r.in_doubt for r in rounds)}"
    )
    print(f"  runs lost: {sum(r.lost for r in rounds)}")


def main(runs: int, rounds: int, lease: float) -> None:
    rng = random.Random(20261129)
    with tempfile.TemporaryDirectory() as tmp:
        counter = Path(tmp) / "bookings.txt"
        for label, on_postgres in (("PostgreSQL, through the run queue", True), ("SQLite", False)):
            with databases(on_postgres, Path(tmp)) as new:
                results = []
                for i in range(rounds):
                    database = asyncio.run(new(f"recovery_{on_postgres}_{i}"))
                    results.append(asyncio.run(one_round(database, runs, lease, counter, rng)))
            report(label, results, runs, lease)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--victim"]:
        asyncio.run(victim(sys.argv[2], int(sys.argv[3]), float(sys.argv[4])))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        parser.add_argument("--runs", type=int, default=16, help="runs per kill")
        parser.add_argument("--rounds", type=int, default=2, help="kills per backend")
        parser.add_argument("--lease", type=float, default=1.0, help="lease seconds")
        args = parser.parse_args()
        main(args.runs, args.rounds, args.lease)
