"""Schedules benchmark: N schedules firing every minute, served by two processes on
PostgreSQL for a few minutes.

    .venv/bin/python contrib/bench/schedules.py [--schedules 1000] [--minutes 5] [--processes 2]

On a throwaway PostgreSQL server it makes N schedules of a one-turn scripted agent (cron
`* * * * *`, a new session per tick), then starts the server processes, each with its
schedule loop (and the run queue), for the given minutes (and one more, not counted, for
their last ticks to fire however late), and reads what they did: ticks
fired against ticks expected (every minute boundary while they served, for every
schedule), runs made per tick (one: none twice), the fire delay (a tick's time to its run
being made) and the start delay (to its execution starting, its RunStarted event, after
the run queue handed it to a process) p50/p99/max, and the CPU seconds PostgreSQL spent
per tick fired (its processes' /proc figures, which include the fired runs' own
execution), and the server processes' CPU seconds per tick (firing, executing and
settling the runs).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pgserver
from databases import databases

from runpoint.core.schedule import Schedule
from runpoint.core.types import new_id
from runpoint.facade import Runpoint
from runpoint.plugins.scripted import ScriptedModel
from runpoint.seams.agent import Agent
from runpoint.seams.model import ModelResponse

DRAIN_SECONDS = 60.0  # served past the minutes measured: their last ticks fire meanwhile
AGENTS = [Agent(id="reporter", model=ScriptedModel([ModelResponse(content="all well")]))]


async def serve(database: str, seconds: float) -> None:
    async with Runpoint(AGENTS, database=database):
        await asyncio.sleep(seconds)


async def make(database: str, count: int) -> None:
    async with Runpoint(AGENTS, database=database, schedule=False) as rp:
        for i in range(count):
            await rp.schedules.create(
                Schedule(
                    schedule_id=new_id(),
                    name=f"s{i}",
                    agent_id="reporter",
                    message="report",
                    cron_expr="* * * * *",
                )
            )


async def read(database: str, since: float, until: float) -> dict[str, float]:
    async with Runpoint(AGENTS, database=database, schedule=False) as rp:
        storage = rp.storage
        rows = await storage.db.fetch(  # type: ignore[attr-defined]
            "SELECT tick, (convert_from(data, 'UTF8')::json->>'fired_at')::float, run_id"
            " FROM schedule_runs WHERE tick >= $1 AND tick <= $2",
            (since, until),
        )
        started = {}  # run_id: when its execution began (its first event, RunStarted)
        for _, _, run_id in rows:
            run = await storage.get_run(run_id)
            first = await storage.read_events(run, 0, 1) if run is not None else []
            if first and first[0].event == "RunStarted":
                started[run_id] = first[0].created_at
        sessions = await storage.db.fetch(  # type: ignore[attr-defined]
            "SELECT count(*) FROM sessions", ()
        )
        schedules = await storage.db.fetch("SELECT count(*) FROM schedules", ())  # type: ignore[attr-defined]
        all_fired = await storage.db.fetch("SELECT count(*) FROM schedule_runs", ())  # type: ignore[attr-defined]
    delays = sorted(fired_at - tick for tick, fired_at, _ in rows)
    starts = sorted(started[run_id] - tick for tick, _, run_id in rows if run_id in started)
    minutes = math.floor(until / 60) - math.ceil(since / 60) + 1
    return {
        "schedules": schedules[0][0],
        "minute_ticks": minutes,
        "expected": schedules[0][0] * minutes,
        "fired": len(rows),
        "distinct_runs": len({r[2] for r in rows}),
        "runs_made_in_all": sessions[0][0],
        "ticks_recorded_in_all": all_fired[0][0],
        "delay_p50_s": statistics.median(delays) if delays else math.nan,
        "delay_p99_s": delays[int(0.99 * (len(delays) - 1))] if delays else math.nan,
        "delay_max_s": delays[-1] if delays else math.nan,
        "started": len(starts),
        "start_p50_s": statistics.median(starts) if starts else math.nan,
        "start_p99_s": starts[int(0.99 * (len(starts) - 1))] if starts else math.nan,
        "start_max_s": starts[-1] if starts else math.nan,
    }


def _children_cpu() -> float:
    """CPU seconds of this process's children that ended (user and system)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--schedules", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--serve", nargs=2, metavar=("DATABASE", "SECONDS"))
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve[0], float(args.serve[1])))
        return
    with tempfile.TemporaryDirectory() as directory, databases(True, Path(directory)) as new:
        database = asyncio.run(new("schedules"))
        asyncio.run(make(database, args.schedules))
        postmaster = asyncio.run(pgserver.postmaster_pid(database))
        seconds = args.minutes * 60
        cpu_before, started = pgserver.cpu_seconds(postmaster), time.time()
        server_before = _children_cpu()
        children = [
            subprocess.Popen(
                [sys.executable, __file__, "--serve", database, str(seconds + DRAIN_SECONDS)]
            )
            for _ in range(args.processes)
        ]
        for child in children:
            child.wait()
        stopped = time.time()
        served = _children_cpu() - server_before  # the server processes'
        cpu = pgserver.cpu_seconds(postmaster) - cpu_before
        # the ticks of the minutes measured (after a few seconds to start): the processes
        # serve on for a while, so that the last of them are fired however late
        figures = asyncio.run(read(database, started + 10, started + seconds))
    figures |= {
        "processes": args.processes,
        "served_s": round(stopped - started, 1),
        "db_cpu_s": round(cpu, 2),
        "db_cpu_ms_per_tick": round(1000 * cpu / max(1, figures["ticks_recorded_in_all"]), 2),
        "server_cpu_s": round(served, 2),
        "server_cpu_ms_per_tick": round(
            1000 * served / max(1, figures["ticks_recorded_in_all"]), 2
        ),
    }
    for name, value in figures.items():
        print(f"{name:24} {value:.3f}" if isinstance(value, float) else f"{name:24} {value}")


if __name__ == "__main__":
    main()
