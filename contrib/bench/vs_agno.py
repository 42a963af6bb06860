"""runpoint and Agno AgentOS side by side over HTTP: runs of 10, 100 and 1,000 messages built
through each server (`stream=false`, one worker, SQLite) against the same loopback OpenAI
server (`providers.py`'s, Chat Completions), with the server's CPU per model turn and the
bytes each vendor request carried.

    .venv/bin/python contrib/bench/vs_agno.py [--sizes 10 100 1000] [--agno PYTHON]
                                           [--rounds 3]

A new server's first run is shown apart: it pays for what is made at first use (the SDK's
client and connection, SQLAlchemy's statement cache). `wait` is the wall time that is
neither the server's CPU nor the vendor's time: the client, the loopback, and waiting to
be scheduled. `--agno` names the interpreter of a virtualenv holding `agno==3.1.10` and
what its AgentOS needs (`pip install agno==3.1.10 openai fastapi uvicorn sqlalchemy
greenlet aiosqlite python-multipart`); without it only runpoint is measured. Each run is
`providers.py`'s: one user message, then model turns of one tool call each, then an
answer. The rounds alternate the servers; a round builds a run of each size as many times
as 200 messages make (20 runs of 10, 2 of 100, so that a figure of a few milliseconds is
not one run's), and each figure is the median of all its runs: on a shared machine
compare the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
from providers import agent, vendor_server

HERE = Path(__file__).resolve().parent
# what `runpoint serve --app vs_agno:agents` serves, and Agno's server is made of the same
agents = [agent("openai-chat")]

AGNO_APP = """
import sys
from agno.agent import Agent
from agno.db.sqlite import SqliteDb
from agno.models.openai import OpenAIChat
from agno.os import AgentOS

def echo(value: str) -> str:
    \"\"\"Return the value (a read: a side effect would add a durable record per call).\"\"\"
    return value

bench = Agent(id="bench", name="bench", model=OpenAIChat(id="gpt-4o"), tools=[echo],
              db=SqliteDb(db_file=sys.argv[1]), tool_call_limit=10**6)
app = AgentOS(agents=[bench]).get_app()

if __name__ == "__main__":
    import uvicorn
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
"""


@dataclass
class Built:
    wall: float  # seconds, the client's
    cpu: float  # seconds of the server's CPU
    turns: int
    vendor_bytes: int  # request bodies the vendor received
    vendor_seconds: float  # the vendor's time handling them
    run_id: str

    @property
    def cpu_per_turn_ms(self) -> float:
        return 1000 * self.cpu / self.turns

    @property
    def bytes_per_request(self) -> float:
        return self.vendor_bytes / self.turns


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far, to the nanosecond (/proc/PID/stat counts in ticks of
    10 ms): its threads' run times, less any thread that ended meanwhile (none here)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


@contextlib.contextmanager
def server(argv: list[str], port: int, cwd: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The server `argv` starts, once it answers /health; with this folder on its
    PYTHONPATH, so `runpoint serve --app MODULE:agents` finds a benchmark's agents."""
    env = os.environ | {"PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"{argv[0]} did not start")
            time.sleep(0.2)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


def build(http: httpx.Client, pid: int, vendor: str, messages: int) -> Built:
    """One run of `messages` messages built through the server."""
    form = {"message": f"calls: {messages // 2 - 1}", "stream": "false"}
    return measure(http, pid, vendor, "/agents/bench/runs", form)


def measure(http: httpx.Client, pid: int, vendor: str, path: str, form: dict[str, str]) -> Built:
    """The run a POST of `form` to `path` builds (`stream=false`), measured: one model turn
    a vendor request."""
    httpx.get(f"{vendor}/tally")  # from zero
    cpu, wall = cpu_seconds(pid), time.perf_counter()
    answer = http.post(path, data=form, timeout=600)
    wall, cpu = time.perf_counter() - wall, cpu_seconds(pid) - cpu
    answer.raise_for_status()
    run = answer.json()
    assert run["status"] == "COMPLETED", answer.text[:500]
    tally = httpx.get(f"{vendor}/tally").json()
    return Built(wall, cpu, tally["requests"], tally["bytes"], tally["seconds"], run["run_id"])


def main(sizes: list[int], agno: str | None, rounds: int) -> None:
    with vendor_server() as vendor, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "agno_app.py").write_text(AGNO_APP)
        servers = {
            "runpoint": [
                *(sys.executable, "-m", "runpoint.adapters.cli", "serve", "--app"),
                *("vs_agno:agents", "--db", f"{tmp}/rp.db", "--port", "7790"),
            ]
        }
        if agno:
            servers["agno"] = [agno, str(work / "agno_app.py"), f"{tmp}/agno.db", "7791"]
        figures: dict[tuple[str, int | str], list[Built]] = {}
        for _ in range(rounds):
            for name, argv in servers.items():
                port = int(argv[-1])
                with (
                    server(argv, port, HERE) as process,
                    httpx.Client(base_url=f"http://127.0.0.1:{port}") as http,
                ):
                    # a new server's first run pays for what is made at first use
                    figures.setdefault((name, "10, first"), []).append(
                        build(http, process.pid, vendor, 10)
                    )
                    for size in sizes:
                        figures.setdefault((name, size), []).extend(
                            build(http, process.pid, vendor, size)
                            for _ in range(max(1, 200 // size))
                        )
        print(f"medians of {rounds} rounds' runs; server CPU from /proc; vendor: requests received")
        print(
            f"{'server':<9} {'messages':>9} {'wall s':>8} {'CPU s':>7} {'wait s':>7} "
            f"{'CPU/turn ms':>12} {'vendor s':>9} {'bytes/request':>14}"
        )
        for (name, label), built in sorted(figures.items(), key=lambda f: f[0][0]):

            def median(value: str, built: list[Built] = built) -> float:
                return float(statistics.median(getattr(b, value) for b in built))

            wall, cpu, vendor_s = median("wall"), median("cpu"), median("vendor_seconds")
            print(
                f"{name:<9} {label:>9} {wall:>8.3f} {cpu:>7.3f} {wall - cpu - vendor_s:>7.3f} "
                f"{median('cpu_per_turn_ms'):>12.2f} {vendor_s:>9.3f} "
                f"{median('bytes_per_request'):>14,.0f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10, 100, 1_000])
    parser.add_argument("--agno", help="the python of a virtualenv with agno==3.1.10")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    main(args.sizes, args.agno, args.rounds)
