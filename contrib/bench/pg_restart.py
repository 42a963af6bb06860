"""PostgreSQL restart drill: what clients and background runs meet when the database is
stopped as a crash would stop it (`pg_ctl stop -m immediate`) and started again.

    .venv/bin/python contrib/bench/pg_restart.py [--down 5] [--clients 8] [--after 40]

`runpoint serve` (the fault test's `booker` agent: two side-effecting tool batches a run,
default lease) runs on a throwaway PostgreSQL server while `--clients` clients create
background runs and read them back. After a few seconds the server is stopped for
`--down` seconds, then started again. Printed: the answers by status during the drill,
the seconds from the database's return to the first background run started (accepted
after the return and seen leaving PENDING), and once every run has settled (or `--after`
seconds passed) the runs by status and the calls put in doubt.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, for tests.*
from tests import postgres
from tests.serving import await_health, free_port

ROOT = Path(__file__).parents[2]


class Drill:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.answers: collections.Counter[int | str] = collections.Counter()
        self.runs: dict[str, tuple[str, float]] = {}  # run_id -> (session_id, accepted at)
        self.started: dict[str, float] = {}  # run_id -> when first seen past PENDING
        self.stop = asyncio.Event()  # the clients'
        self.settled = asyncio.Event()  # the watch's
        self.back = float("inf")  # when the database was back

    async def client(self, n: int, http: httpx.AsyncClient) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            form = {"message": f"c{n}-{i}: Paris Tokyo", "stream": "false", "background": "true"}
            try:
                answer = await http.post("/agents/booker/runs", data=form)
                self.answers[answer.status_code] += 1
                if answer.status_code == 202:
                    body = answer.json()
                    self.runs[body["run_id"]] = (body["session_id"], time.monotonic())
                else:
                    await asyncio.sleep(0.2)
            except httpx.HTTPError as exc:
                self.answers[type(exc).__name__] += 1
                await asyncio.sleep(0.2)
            await asyncio.sleep(0.05)

    async def watch(self, http: httpx.AsyncClient) -> None:
        """Poll the runs accepted after the database was back and not yet seen started,
        to tell when each left PENDING."""
        while not self.settled.is_set():
            for run_id, (session_id, at) in list(self.runs.items()):
                if run_id in self.started or at < self.back:
                    continue
                state = await self.state(http, run_id, session_id)
                if state is not None and state["status"] != "PENDING":
                    self.started[run_id] = time.monotonic()
            await asyncio.sleep(0.1)

    async def state(self, http: httpx.AsyncClient, run_id: str, session_id: str) -> Any:
        try:
            got = await http.get(f"/agents/booker/runs/{run_id}", params={"session_id": session_id})
        except httpx.HTTPError:
            return None
        self.answers[got.status_code] += 1
        return got.json() if got.status_code == 200 else None


async def drill(base_url: str, server: postgres.TemporaryServer, args: argparse.Namespace) -> None:
    d = Drill(base_url)
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        tasks = [asyncio.create_task(d.client(n, http)) for n in range(args.clients)]
        watch = asyncio.create_task(d.watch(http))
        await asyncio.sleep(3)
        print(f"stopping PostgreSQL for {args.down} s", flush=True)
        await asyncio.to_thread(server.crash)
        await asyncio.sleep(args.down)
        await asyncio.to_thread(server.start_again)
        back = d.back = time.monotonic()
        print("PostgreSQL is back", flush=True)
        await asyncio.sleep(args.load_after)
        d.stop.set()
        await asyncio.gather(*tasks)
        answers_under_load = dict(d.answers)
        # every run settles: COMPLETED, or PAUSED with calls in doubt
        statuses: collections.Counter[str] = collections.Counter()
        in_doubt = 0
        deadline = time.monotonic() + args.after
        while True:
            statuses.clear()
            in_doubt = 0
            for run_id, (session_id, _) in d.runs.items():
                state = await d.state(http, run_id, session_id)
                status = state["status"] if state else "unreadable"
                statuses[status] += 1
                if state and status == "PAUSED":
                    in_doubt += sum(1 for t in state.get("tools") or [] if t.get("in_doubt"))
            if set(statuses) <= {"COMPLETED", "PAUSED"} or time.monotonic() > deadline:
                break
            await asyncio.sleep(1)
        d.settled.set()
        await watch
    after = [d.started[r] - back for r, (_, at) in d.runs.items() if at > back and r in d.started]
    print(f"answers during the drill (status: count): {answers_under_load}")
    print(f"runs accepted: {len(d.runs)}; settled as {dict(statuses)}")
    accepted = [at - back for _, at in d.runs.values() if at > back]
    print(f"database back -> first run accepted: {min(accepted, default=float('nan')):.1f} s")
    first = f"{min(after):.1f} s" if after else "none started"
    print(f"database back -> first background run accepted after it started: {first}")
    print(f"calls put in doubt: {in_doubt}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--down", type=float, default=5.0, help="seconds PostgreSQL is down")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--load-after", type=float, default=10.0, help="load after the return")
    parser.add_argument("--after", type=float, default=60.0, help="most seconds to settle")
    args = parser.parse_args()
    bin_dir = postgres.binaries()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (apt-get install postgresql)")
    server = postgres.TemporaryServer(bin_dir)
    database = server.start()
    counter = Path(tempfile.mkdtemp(prefix="runpoint-drill-")) / "bookings.txt"
    command = shutil.which("runpoint", path=str(Path(sys.executable).parent))
    assert command
    port = free_port()
    argv = [command, "serve", "--app", "tests.faults.app:agents", "--db", database]
    argv += ["--port", str(port), "--log-level", "warning"]
    env = os.environ | {"FAULTS_COUNTER": str(counter)}
    process = subprocess.Popen(argv, env=env, cwd=ROOT)
    try:
        base_url = f"http://127.0.0.1:{port}"
        await_health(process, base_url, seconds=30)
        asyncio.run(drill(base_url, server, args))
    finally:
        process.terminate()
        process.wait(timeout=30)
        server.stop()


if __name__ == "__main__":
    main()
