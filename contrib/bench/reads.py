"""Read benchmark: what the hot reads cost the server, against the same bytes served bare.

Seeds a database with a run of 500 checkpoints (499 tool batches of one call, then an
answer: 1,000 messages) and a run of 10,000 messages (four wide batches, as endpoints.py),
serves it with `runpoint serve` (one worker), and serves the very bytes of each answer,
fetched once, from a bare Litestar endpoint under the same uvicorn (bare.py). wrk loads
each endpoint on one connection (`--connections`), in turns with the bare endpoint
(`--rounds` of each, so that both see the same load on a shared machine); the server's
CPU per request is read from /proc on each side, over all its rounds. Prints p50 and p99
latency (the median of the rounds'), CPU per request and the ratio of runpoint's to the
bare endpoint's, and checks the issue's targets: the timeline of 500 checkpoints within
2x of the bare endpoint's CPU, the snapshot and get-run of 10,000 messages at p50 <= 60 ms. A
document read again is served as kept (adapters/litestar/documents.py), so the first
request of each, which makes it, is timed on its own ("first ms", one sample), once the
server has made the same three documents of the other run (its imports and first-use
costs paid).

    .venv/bin/python contrib/bench/reads.py [--postgres] [--duration 2] [--rounds 3]
        [--connections 1]

With one connection the server sleeps between a request and the next, and on PostgreSQL
while its one read of the request is under way: a wake-up costs it CPU that a server
under load, never idle, does not pay (its events come together), so `--connections 8`
shows what a request costs it when it is busy.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from databases import databases
from endpoints import AGENT_ID, LARGE, Result, free_port, seed, serve, started, wrk

TIMELINE, SNAPSHOT, GET_RUN = "timeline", "snapshot", "get-run"
ENDPOINTS = {
    TIMELINE: "timeline    500 checkpoints",
    SNAPSHOT: "snapshot    10,000 messages",
    GET_RUN: "get-run     10,000 messages",
}


def cpu_seconds(pid: int) -> float:
    """The user and system CPU time process `pid` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Load:
    """An endpoint's rounds under wrk, and its server's CPU over them."""

    def __init__(self, name: str, url: str, pid: int, connections: int) -> None:
        self.name, self.url, self.pid, self.connections = name, url, pid, connections
        self.rounds: list[Result] = []
        self.cpu_seconds = 0.0

    def round(self, duration: int) -> None:
        before = cpu_seconds(self.pid)
        self.rounds.append(wrk(self.name, self.url, duration, self.connections, []))
        self.cpu_seconds += cpu_seconds(self.pid) - before

    def result(self) -> tuple[Result, float]:
        """The median round's latencies, and the CPU ms per request over all rounds."""
        requests = sum(r.requests for r in self.rounds)
        median = Result(
            self.name,
            statistics.median(r.rps for r in self.rounds),
            statistics.median(r.p50_ms for r in self.rounds),
            statistics.median(r.p99_ms for r in self.rounds),
            requests,
        )
        return median, 1000 * self.cpu_seconds / requests


def loaded(
    name: str,
    url: str,
    pid: int,
    bare: tuple[str, int],
    rounds: int,
    duration: int,
    connections: int,
) -> tuple[tuple[Result, float], tuple[Result, float]]:
    """`url` and its bare twin loaded in turns: each side's figures."""
    ours, theirs = Load(name, url, pid, connections), Load("bare", *bare, connections)
    for _ in range(rounds):
        ours.round(duration)
        theirs.round(duration)
    return ours.result(), theirs.result()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL")
    parser.add_argument("--duration", type=int, default=2, help="seconds per round")
    parser.add_argument("--rounds", type=int, default=3, help="turns of each side per endpoint")
    parser.add_argument("--connections", type=int, default=1, help="wrk's connections")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, databases(args.postgres, Path(tmp)) as new:
        database = asyncio.run(new("reads"))
        timeline_run, timeline_session, _ = asyncio.run(seed(database, [1] * 499))
        large_run, large_session, interior = asyncio.run(seed(database, LARGE))
        port = free_port()
        base = f"http://127.0.0.1:{port}/agents/{AGENT_ID}/runs"
        urls = {
            TIMELINE: f"{base}/{timeline_run}/checkpoints?session_id={timeline_session}",
            SNAPSHOT: f"{base}/{large_run}/checkpoints/{interior}?session_id={large_session}",
            GET_RUN: f"{base}/{large_run}?session_id={large_session}",
        }
        server = serve(database, port)
        bare_dir, bare_port = Path(tmp) / "bare", free_port()
        bare_dir.mkdir()
        bare = None
        try:
            warm = f"{base}/{timeline_run}"
            for url in (warm, f"{warm}/checkpoints/3"):
                httpx.get(url, params={"session_id": timeline_session}).raise_for_status()
            first: dict[str, float] = {}
            for name, url in urls.items():  # the bytes the bare endpoint serves
                started_at = time.perf_counter()
                (bare_dir / name).write_bytes(httpx.get(url).raise_for_status().content)
                first[name] = 1000 * (time.perf_counter() - started_at)
            command = [sys.executable, str(Path(__file__).with_name("bare.py"))]
            bare_url = f"http://127.0.0.1:{bare_port}"
            bare = started(
                subprocess.Popen([*command, str(bare_dir), str(bare_port)]),
                f"{bare_url}/{TIMELINE}",
            )
            figures = {
                name: (
                    *loaded(
                        ENDPOINTS[name],
                        url,
                        server.pid,
                        (f"{bare_url}/{name}", bare.pid),
                        args.rounds,
                        args.duration,
                        args.connections,
                    ),
                    (bare_dir / name).stat().st_size,
                    first[name],
                )
                for name, url in urls.items()
            }
        finally:
            for process in (server, bare):
                if process is not None:
                    process.terminate()
                    process.wait()
    backend = "PostgreSQL" if args.postgres else "SQLite"
    threads = min(2, args.connections)
    how = f"wrk -t{threads} -c{args.connections} -d{args.duration}s x {args.rounds}"
    how += " in turns with the bare endpoint"
    report(figures, f"{backend}; {how}, on loopback, one worker each")


def report(
    figures: dict[str, tuple[tuple[Result, float], tuple[Result, float], int, float]], how: str
) -> None:
    print(how)
    print(
        f"{'endpoint':<29}{'bytes':>10}{'first ms':>10}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'CPU ms/req':>12}{'bare p50':>10}{'bare CPU':>10}{'CPU ratio':>11}"
    )
    for (ours, cpu), (bare, bare_cpu), size, first in figures.values():
        print(
            f"{ours.name:<29}{size:>10,}{first:>10.1f}{ours.p50_ms:>9.2f}{ours.p99_ms:>9.2f}"
            f"{cpu:>12.2f}{bare.p50_ms:>10.2f}{bare_cpu:>10.2f}{cpu / bare_cpu:>10.1f}x"
        )
    (_, cpu), (_, bare_cpu), _, _ = figures[TIMELINE]
    ratio = cpu / bare_cpu
    print(
        f"target: timeline of 500 checkpoints, CPU <= 2x the bare endpoint's: {ratio:.2f}x "
        f"({'met' if ratio <= 2 else 'NOT met'})"
    )
    for name in (SNAPSHOT, GET_RUN):
        p50 = figures[name][0][0].p50_ms
        print(
            f"target: {name} of 10,000 messages, p50 <= 60 ms: {p50:.1f} ms "
            f"({'met' if p50 <= 60 else 'NOT met'})"
        )


if __name__ == "__main__":
    main()
