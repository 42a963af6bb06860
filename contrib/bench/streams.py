"""Stream benchmark: how long a run's event takes from its write to a follower in another
server process, with 1 and 100 followers, and what a follower costs that process.

    .venv/bin/python contrib/bench/streams.py               # SQLite
    .venv/bin/python contrib/bench/streams.py --postgres    # a throwaway local PostgreSQL

This process executes runs (a model that streams a text delta every few milliseconds,
as a vendor does) and notes when each event's write committed; a `runpoint serve` beside
it serves the followers, who (in a third process, so that reading a hundred streams slows
neither the run nor the server) join each run's stream over HTTP from its first event and
note when each event arrives. Latency is arrival minus commit, for the events committed
after the follower joined (the live ones). The server's CPU (user + system, from /proc)
over a run, divided by the events it sent, is its cost per follower-event.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from databases import NewDatabase, run_on_databases

from runpoint.core.types import Run, RunEvent
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.sql.store import SqlStorage
from runpoint.seams.agent import Agent
from runpoint.seams.model import Chunk, ModelRequest, ModelResponse, TextDelta

DELTAS = 200  # per run
DELTA_SECONDS = 0.01  # between deltas: 100 tokens a second
FOLLOWERS = (1, 100)
RUNS = 3  # per follower count


class Streaming:
    """A model whose every answer is DELTAS words, one every DELTA_SECONDS."""

    name = "bench:stream"

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        for i in range(DELTAS):
            await asyncio.sleep(DELTA_SECONDS)
            yield TextDelta(f"w{i} ")
        yield ModelResponse(content=" ".join(f"w{i}" for i in range(DELTAS)) + " ")


class Commits:
    """When each event's write committed, by (run_id, seq): the storage's event writes,
    timed on their way out."""

    def __init__(self, storage: SqlStorage) -> None:
        self.at: dict[tuple[str, int], float] = {}
        append, save = storage.append_events, storage.save

        async def append_events(run: Run, events: Sequence[RunEvent]) -> bool:
            written = await append(run, events)
            self.note(run, events)
            return written

        async def timed_save(run: Run, *args: object, **kwargs: object) -> None:
            await save(run, *args, **kwargs)  # type: ignore[arg-type]
            self.note(run, kwargs.get("events", ()))  # type: ignore[arg-type]

        storage.append_events = append_events  # type: ignore[method-assign]
        storage.save = timed_save  # type: ignore[method-assign]

    def note(self, run: Run, events: Sequence[RunEvent]) -> None:
        committed = time.time()
        for event in events:
            self.at[(run.run_id, event.seq)] = committed


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


Followed = list[tuple[float, dict[int, float]]]  # per follower: when it joined, arrivals


ID = re.compile(rb"\nid: (\d+)\n")


def followers_of(url: str, path: str, followers: int) -> Followed:
    """In the followers' process: `followers` streams of `path` to the end, each read as raw
    bytes (an HTTP client that parses lines would be slower than the server it measures)."""
    address = urlsplit(url)
    request = f"GET {path} HTTP/1.1\r\nHost: {address.netloc}\r\nConnection: close\r\n\r\n"

    async def follow() -> tuple[float, dict[int, float]]:
        reader, writer = await asyncio.open_connection(address.hostname, address.port)
        writer.write(request.encode())
        joined = time.time()
        arrived: dict[int, float] = {}
        carried = b""
        while chunk := await reader.read(1 << 16):
            at = time.time()
            data = carried + chunk
            for found in ID.finditer(data):
                arrived.setdefault(int(found[1]), at)
            carried = data[-24:]  # an id cut in two by a read is found with the next
        writer.close()
        return joined, arrived

    async def all_of_them() -> Followed:
        return await asyncio.gather(*(follow() for _ in range(followers)))

    return asyncio.run(all_of_them())


async def one_run(
    rp: Runpoint,
    commits: Commits,
    server: subprocess.Popen[bytes],
    url: str,
    followers: int,
    pool: ProcessPoolExecutor,
) -> tuple[list[float], float, int]:
    """Latencies (s) of the live events, server CPU seconds, events sent."""
    handle = await rp.create_run(CreateRun(agent_id="bench", message="go"))
    run = handle.run
    path = f"/agents/{run.agent_id}/runs/{run.run_id}/events?session_id={run.session_id}&events=all"
    cpu = cpu_seconds(server.pid)
    loop = asyncio.get_running_loop()
    got = await loop.run_in_executor(pool, followers_of, url, path, followers)
    cpu = cpu_seconds(server.pid) - cpu
    await handle.result()
    latencies = [
        at - commits.at[(handle.run.run_id, seq)]
        for joined, arrived in got
        for seq, at in arrived.items()
        if commits.at[(handle.run.run_id, seq)] > joined
    ]
    return latencies, cpu, sum(len(arrived) for _, arrived in got)


def percentile(values: list[float], p: float) -> float:
    return sorted(values)[min(len(values) - 1, int(p * len(values)))]


async def measure(database: str) -> None:
    storage = SqlStorage(database)
    commits = Commits(storage)
    agent = Agent(id="bench", model=Streaming())
    pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    pool.submit(time.time).result()  # started before the first run
    async with Runpoint([agent], storage=storage) as rp:  # migrates before the server starts
        server, url = start_server(database)
        try:
            for followers in FOLLOWERS:
                latencies: list[float] = []
                cpu, sent = 0.0, 0
                for _ in range(RUNS):
                    run_latencies, run_cpu, run_sent = await one_run(
                        rp, commits, server, url, followers, pool
                    )
                    latencies += run_latencies
                    cpu, sent = cpu + run_cpu, sent + run_sent
                print(
                    f"{followers:>9} {1000 * percentile(latencies, 0.5):>10.1f} "
                    f"{1000 * percentile(latencies, 0.99):>10.1f} {len(latencies):>10} "
                    f"{sent:>12} {1e6 * cpu / sent:>22.1f}"
                )
        finally:
            server.terminate()
            server.wait(timeout=10)
            pool.shutdown()


def start_server(database: str) -> tuple[subprocess.Popen[bytes], str]:
    """`runpoint serve` with an agent of the benchmark's id (a join checks it is served)."""
    here = Path(__file__).parent
    port = free_port()
    command = shutil.which("runpoint", path=str(Path(sys.executable).parent))
    assert command
    env = os.environ | {"PYTHONPATH": str(here)}
    server = subprocess.Popen(
        [command, "serve", "--app", "streams:served", "--db", database, "--port", str(port),
         "--log-level", "warning"],
        env=env,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/health").status_code == 200:
                return server, url
        except httpx.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit("runpoint serve did not come up") from None
            time.sleep(0.1)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# what the follower server serves: an agent of the benchmark's id (its model never runs there)
served = [Agent(id="bench", model="scripted:demo")]


async def main(new: NewDatabase) -> None:
    print(
        f"each run: {DELTAS} text deltas, one every {1000 * DELTA_SECONDS:.0f} ms; "
        f"{RUNS} runs per row; the followers in another server process"
    )
    print(
        f"{'followers':>9} {'p50 ms':>10} {'p99 ms':>10} {'live evts':>10} "
        f"{'events sent':>12} {'server CPU us/evt/flw':>22}"
    )
    await measure(await new("bench_streams"))


if __name__ == "__main__":
    run_on_databases(__doc__.splitlines()[0], main)
