"""Memory under sustained load: one `runpoint serve` on SQLite while `--users` clients
create, read and continue runs without pause and `--followers` clients follow the event
streams of runs that wait (idle streams). Every `--every` seconds it prints the server's
resident memory (RSS) and the runs made; with `--trace` the server starts tracemalloc at
minute 1 and, at minute 5 and at the end, the bench prints what was allocated since and
is still held, the most first (the largest holders), with the frames of runpoint that
allocated it.

    .venv/bin/python contrib/bench/memory.py                 # 10 minutes
    .venv/bin/python contrib/bench/memory.py --minutes 30 --trace

Each user's loop: create a run of the demo `travel-agent` (stream=false), read it back
(get-run and its timeline), continue it from message 3 (a fork) and from its end with a
new input (a follow-up in its session), then read its session. Each follower starts a
background run of `waiter`, whose tool never returns, and holds its event stream open.
The server is this file run with `--serve` (a SIGUSR1 starts tracemalloc, a SIGUSR2
writes the holders to a file): nothing in runpoint itself is there for the bench.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from types import FrameType

import httpx

from runpoint.core.types import ToolCall
from runpoint.plugins import demo
from runpoint.plugins.scripted import ScriptedModel, call_id
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import ModelRequest, ModelResponse

ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(ROOT))  # the repository, for tests.*
from tests.serving import await_health, free_port  # noqa: E402

TOP = 12
OURS = ("/kernel/", "/adapters/", "/plugins/")  # runpoint's frames in a traceback


@tool(effect="read")
async def wait() -> str:
    """Wait (for as long as the bench runs)."""
    await asyncio.Event().wait()
    return "done"


def waiting(request: ModelRequest) -> ModelResponse:
    if any(m.role == "tool" for m in request.messages):
        return ModelResponse(content="Waited.")
    return ModelResponse(content="Waiting.", tool_calls=[ToolCall(call_id(request), "wait", {})])


agents = [
    *demo.agents,
    Agent(id="waiter", model=ScriptedModel(waiting, name="scripted:waiting"), tools=[wait]),
]


# -- the server's side: `memory.py --serve HOLDERS_FILE runpoint-serve-arguments...`


def serve(holders: Path, argv: list[str]) -> int:
    """`runpoint serve` with `argv`; a SIGUSR1 starts tracemalloc, a SIGUSR2 writes to
    `holders` what was allocated since and is still held, the most first."""

    def trace(signum: int, frame: FrameType | None) -> None:
        if not tracemalloc.is_tracing():
            tracemalloc.start(4)

    def write_holders(signum: int, frame: FrameType | None) -> None:
        lines = []
        for stat in tracemalloc.take_snapshot().statistics("traceback")[:TOP]:
            ours = [f for f in stat.traceback if any(o in f.filename for o in OURS)]
            where = ours[-3:] or list(stat.traceback)[-1:]
            at = " < ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(where))
            lines.append(f"{stat.size / 1e6:7.2f} MB {stat.count:8d} blocks  {at}")
        holders.write_text("\n".join(lines) + "\n")

    signal.signal(signal.SIGUSR1, trace)
    signal.signal(signal.SIGUSR2, write_holders)
    from runpoint.adapters.cli import main

    return main(argv)


# -- the load's side


def rss(pid: int) -> int:
    """The process's resident memory, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


class Load:
    def __init__(self) -> None:
        self.runs = 0
        self.requests = 0
        self.errors: collections.Counter[str] = collections.Counter()  # by status and text

    def count(self, answer: httpx.Response) -> httpx.Response:
        self.requests += 1
        if answer.status_code >= 400:
            self.errors[f"{answer.status_code} {answer.request.method}: {answer.text[:200]}"] += 1
        return answer

    async def user(self, n: int, http: httpx.AsyncClient) -> None:
        while True:
            try:
                await self.loop(n, http)
            except httpx.HTTPError as exc:  # a timeout, say: counted, and the user goes on
                self.errors[f"{type(exc).__name__}: {exc}"[:200]] += 1

    async def loop(self, n: int, http: httpx.AsyncClient) -> None:
        runs = "/agents/travel-agent/runs"
        while True:
            form = {"message": f"u{n}: Paris, Tokyo and Lagos", "stream": "false"}
            made = self.count(await http.post(runs, data=form))
            if made.status_code != 200:
                await asyncio.sleep(0.5)
                continue
            run, session = made.json()["run_id"], made.json()["session_id"]
            query = {"session_id": session}
            self.count(await http.get(f"{runs}/{run}", params=query))
            self.count(await http.get(f"{runs}/{run}/checkpoints", params=query))
            for continue_from, text in (("3", "Paris"), ("end", "And Kyoto?")):
                form = {"session_id": session, "stream": "false", "input": text}
                form["continue_from"] = continue_from
                self.count(await http.post(f"{runs}/{run}/continue", data=form))
            self.count(await http.get(f"/sessions/{session}"))
            self.runs += 3

    async def follower(self, http: httpx.AsyncClient) -> None:
        form = {"message": "wait", "stream": "false", "background": "true"}
        made = self.count(await http.post("/agents/waiter/runs", data=form)).json()
        path = f"/agents/waiter/runs/{made['run_id']}/events"
        while True:  # a stream that ends (it should not) is followed again
            params = {"session_id": made["session_id"]}
            async with http.stream("GET", path, params=params, timeout=None) as events:
                async for _ in events.aiter_raw():
                    pass


async def drive(args: argparse.Namespace, base_url: str, pid: int, holders: Path) -> None:
    load = Load()
    limits = httpx.Limits(max_connections=args.users + args.followers + 10)
    async with httpx.AsyncClient(base_url=base_url, timeout=60, limits=limits) as http:
        tasks = [asyncio.create_task(load.follower(http)) for _ in range(args.followers)]
        tasks += [asyncio.create_task(load.user(n, http)) for n in range(args.users)]
        began = time.monotonic()
        figures: dict[int, int] = {}
        print("  time  RSS (MB)  runs made  requests  errors", flush=True)
        ticks = int(60 * args.minutes / args.every)
        for tick in range(1, ticks + 1):
            await asyncio.sleep(began + tick * args.every - time.monotonic())
            seconds = int(tick * args.every)
            figures[seconds] = rss(pid)
            errors = sum(load.errors.values())
            print(
                f"{seconds // 60:>3}:{seconds % 60:02}  {figures[seconds] / 1e6:>8.1f}"
                f"  {load.runs:>9}  {load.requests:>8}  {errors:>6}",
                flush=True,
            )
            if args.trace and seconds == 60:
                os.kill(pid, signal.SIGUSR1)
            elif args.trace and seconds in (300, ticks * int(args.every)):
                await asyncio.to_thread(holders_of, pid, holders, seconds)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    five, last = figures.get(300), figures[max(figures)]
    if five:
        print(f"RSS at the end against minute 5: {last / five - 1:+.1%}")
    for error, times in load.errors.most_common():
        print(f"{times} x {error}")


def holders_of(pid: int, holders: Path, seconds: int) -> None:
    """Ask the server for its holders and print them."""
    holders.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    while not holders.exists():
        time.sleep(0.5)
    time.sleep(0.5)  # written whole
    print(f"held at {seconds // 60} min, allocated since minute 1:\n{holders.read_text()}")


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        raise SystemExit(serve(Path(sys.argv[2]), sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--every", type=float, default=30, help="seconds between figures")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--followers", type=int, default=50)
    parser.add_argument("--trace", action="store_true", help="the holders, with tracemalloc")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        holders = Path(tmp) / "holders.txt"
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve", str(holders), "serve"]
        argv += ["--app", "__main__:agents", "--db", str(Path(tmp) / "bench.db")]
        argv += ["--port", str(port), "--log-level", "warning"]
        server = subprocess.Popen(argv, cwd=tmp)
        try:
            base_url = f"http://127.0.0.1:{port}"
            await_health(server, base_url, seconds=60)
            asyncio.run(drive(args, base_url, server.pid, holders))
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
