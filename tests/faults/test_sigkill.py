"""The fault test: background runs survive their server being killed again and again.

The server (`runpoint serve`, a subprocess) is killed with SIGKILL at random moments while
background runs with several tool batches go on, and restarted each time. Afterwards every
run must be COMPLETED, every side-effecting call must have run exactly once (counted
outside the server), and every transcript must be whole: no duplicate index, one result
per call. Calls the server was killed in the middle of pause their run (in doubt); the
test decides as an operator would, from the outside record: supply the result of a call
that ran, run one that did not. On PostgreSQL the runs are handed out through the run
queue (pgqueuer), and a server killed with jobs under way leaves them to the lease watch."""

from __future__ import annotations

import asyncio
import collections
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import postgres
from tests.faults.app import booked
from tests.serving import await_health, free_port

SEED = 20261129
RUNS = 6
KILLS = 6
CITIES = ("Paris", "Tokyo", "Lagos", "Kyoto")
LEASE_SECONDS = 1.0


class Server:
    """`runpoint serve` on one port and database, killed and started at will."""

    def __init__(self, database: str, counter: Path, app: str = "tests.faults.app:agents") -> None:
        command = shutil.which("runpoint", path=str(Path(sys.executable).parent))
        assert command
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.argv = [
            *(command, "serve", "--app", app, "--db", database),
            *("--port", str(self.port), "--log-level", "warning"),
            *("--lease-seconds", str(LEASE_SECONDS)),
        ]
        self.env = os.environ | {"FAULTS_COUNTER": str(counter)}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.argv, env=self.env, cwd=Path(__file__).parents[2])
        await_health(self.process, self.url, seconds=30)

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()


@pytest.fixture
def server(database: str, tmp_path: Path) -> Iterator[Server]:
    server = Server(database, tmp_path / "bookings.txt")
    server.start()
    yield server
    server.kill()


def test_runs_survive_their_server_being_killed(
    server: Server, database: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    counter = tmp_path / "bookings.txt"
    jobs = {f"job-{i}": rng.sample(CITIES, 3) for i in range(RUNS)}
    runs: dict[str, tuple[str, str]] = {}  # job -> (run_id, session_id)
    for job, cities in jobs.items():
        accepted = httpx.post(
            f"{server.url}/agents/booker/runs",
            data={"message": f"{job}: {' '.join(cities)}", "stream": "false", "background": "true"},
        )
        assert accepted.status_code == 202, accepted.text
        assert accepted.json()["status"] == "PENDING"
        runs[job] = (accepted.json()["run_id"], accepted.json()["session_id"])

    for _ in range(KILLS):
        time.sleep(rng.uniform(0.05, 0.8))
        server.kill()
        server.start()

    def run(job: str) -> dict[str, object]:
        run_id, session_id = runs[job]
        url = f"{server.url}/agents/booker/runs/{run_id}"
        got = httpx.get(url, params={"session_id": session_id})
        assert got.status_code == 200, got.text
        return got.json()  # type: ignore[no-any-return]

    decided = 0
    deadline = time.monotonic() + 90
    while (pending := {j: r for j in jobs if (r := run(j))["status"] != "COMPLETED"}) and (
        time.monotonic() < deadline
    ):
        for job, state in pending.items():
            if state["status"] != "PAUSED":
                continue
            done = set(counter.read_text().splitlines())
            decisions = [
                {"tool_call_id": t["tool_call_id"], "result": booked(job, t["tool_args"]["city"])}
                if f"{job} {t['tool_args']['city']}" in done
                else {"tool_call_id": t["tool_call_id"], "confirmed": True}
                for t in state["tools"]  # type: ignore[attr-defined]
                if t["in_doubt"]
            ]
            run_id, session_id = runs[job]
            answer = httpx.post(
                f"{server.url}/agents/booker/runs/{run_id}/continue",
                json={"session_id": session_id, "tools": decisions, "stream": False},
                timeout=30,
            )
            assert answer.status_code == 200, answer.text
            decided += len(decisions)
        time.sleep(0.2)
    assert not pending, {j: (s["status"], s.get("content")) for j, s in pending.items()}

    bookings = collections.Counter(counter.read_text().splitlines())
    expected = {f"{job} {city}" for job, cities in jobs.items() for city in cities}
    assert set(bookings) == expected
    assert [b for b, n in bookings.items() if n > 1] == []  # no side effect ran twice
    for job, cities in jobs.items():
        state = run(job)
        messages = state["messages"]
        assert isinstance(messages, list)
        assert len({m["id"] for m in messages}) == len(messages)  # nothing twice
        results = collections.Counter(m["tool_call_id"] for m in messages if m["role"] == "tool")
        assert set(results.values()) == {1} and len(results) == len(cities)
        assert state["content"] == f"{job}: all booked."
    if database.startswith("postgresql"):  # every run was handed out through the run queue
        queued = "SELECT count(*) FROM pgqueuer_log WHERE status = 'queued'"
        assert asyncio.run(postgres.fetch_value(database, queued)) == RUNS
    print(f"\nkills: {KILLS}, runs: {RUNS}, calls decided by the operator: {decided}")
