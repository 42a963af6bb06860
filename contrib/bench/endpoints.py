"""HTTP benchmark: the hot read paths of `runpoint serve` (one worker) under wrk.

Seeds a fresh SQLite database with two runs of the same shape (four tool batches, so five
checkpoints each) but of 10 and of 10,000 messages, starts `runpoint serve` on it, and
loads each endpoint from wrk on loopback: the timeline, the snapshot at the last interior
checkpoint and get-run of each run, and /health as the ceiling (a bare JSON endpoint on
the same server, through the same app). Prints requests per second, p50 and p99 latency,
and checks the issue's two targets. With --api-key, the server wants an API key and every
request sends one (the price of authentication; /health, public, stays the ceiling).

    python contrib/bench/endpoints.py [--duration 5] [--connections 8] [--api-key]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from runpoint.core.types import ToolCall
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel, call_id
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import ModelRequest, ModelResponse

AGENT_ID = "travel-agent"  # an agent the default `runpoint serve` knows
# tool calls per batch: 1 user + 4 x (assistant + calls) + 1 answer messages in all
SMALL, LARGE = [1, 1, 1, 1], [2499, 2499, 2498, 2498]


@tool(effect="read")  # a side effect would add a durable record per call, 2,499 at once
async def lookup(city: str) -> str:
    return "ok"


def batches(sizes: list[int]) -> ScriptedModel:
    """A model that makes one tool batch of each size, then answers."""

    def turn(request: ModelRequest) -> ModelResponse:
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done == len(sizes):
            return ModelResponse(content="done")
        calls = [ToolCall(call_id(request, i), "lookup", {"city": "x"}) for i in range(sizes[done])]
        return ModelResponse(content=f"batch {done}", tool_calls=calls)

    return ScriptedModel(turn)


async def seed(database: str, sizes: list[int]) -> tuple[str, str, int]:
    """Make one run; return its run_id, session_id and last interior checkpoint."""
    agent = Agent(id=AGENT_ID, model=batches(sizes), tools=[lookup], max_turns=len(sizes) + 1)
    async with Runpoint([agent], database=database) as rp:
        run = await (await rp.create_run(CreateRun(agent_id=AGENT_ID, message="go"))).result()
        _, checkpoints = await rp.timeline(run.run_id)
        assert run.message_count == 2 + len(sizes) + sum(sizes), run
        return run.run_id, run.session_id, checkpoints[-2].message_index


@dataclass
class Result:
    name: str
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(name: str, url: str, duration: int, connections: int, headers: list[str]) -> Result:
    threads = min(2, connections)  # wrk wants a connection per thread at least
    out = subprocess.run(
        ["wrk", f"-t{threads}", f"-c{connections}", f"-d{duration}s", "--latency", *headers, url],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    if re.search(r"Non-2xx or 3xx responses", out):
        raise SystemExit(f"{name}: errors under load\n{out}")

    def percentile(p: str) -> float:
        found = re.search(rf"^\s+{p}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if found is None:
            raise SystemExit(f"{name}: no {p}th percentile in wrk's output\n{out}")
        return float(found[1]) * _UNITS[found[2]]

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return Result(name, rps, percentile("50"), percentile("99"), requests)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve(db: Path | str, port: int, *options: str) -> subprocess.Popen[bytes]:
    command = shutil.which("runpoint", path=str(Path(sys.executable).parent)) or "runpoint"
    args = [
        "serve",
        "--db",
        str(db),
        "--port",
        str(port),
        "--workers",
        "1",
        "--log-level",
        "warning",
        *options,
    ]
    return started(subprocess.Popen([command, *args]), f"http://127.0.0.1:{port}/health")


def started(process: subprocess.Popen[bytes], url: str) -> subprocess.Popen[bytes]:
    """`process`, once a GET of `url` answers 200."""
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url).status_code == 200:
                return process
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{url}: the server did not start") from None
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=int, default=5, help="seconds per endpoint")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--api-key", action="store_true", help="authenticate every request")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        database = f"sqlite:///{db}"
        runs = {
            n: asyncio.run(seed(database, sizes)) for n, sizes in ((10, SMALL), (10_000, LARGE))
        }
        options, headers = [], []
        if args.api_key:  # of the default team, which the seeded runs belong to
            key = "bench-key"
            keys = Path(tmp) / "keys.yaml"
            keys.write_text(
                f"keys: [{{sha256: {hashlib.sha256(key.encode()).hexdigest()}, team: default}}]\n"
            )
            options, headers = ["--api-keys", str(keys)], ["-H", f"Authorization: Bearer {key}"]
        port = free_port()
        server = serve(db, port, *options)
        try:
            base = f"http://127.0.0.1:{port}"
            urls = {"ceiling (GET /health)": f"{base}/health"}
            for n, (run_id, session_id, interior) in runs.items():
                run = f"{base}/agents/{AGENT_ID}/runs/{run_id}"
                query = f"?session_id={session_id}"
                urls[f"timeline   {n:>6} msgs"] = f"{run}/checkpoints{query}"
                urls[f"snapshot   {n:>6} msgs"] = f"{run}/checkpoints/{interior}{query}"
                urls[f"get-run    {n:>6} msgs"] = f"{run}{query}"
            sent = dict(h.split(": ", 1) for h in headers[1::2])
            for url in urls.values():  # warm up, and fail early on a bad URL
                httpx.get(url, headers=sent).raise_for_status()
            results = {
                name: wrk(name, url, args.duration, args.connections, headers)
                for name, url in urls.items()
            }
        finally:
            server.terminate()
            server.wait()
    report(results, args)


def report(results: dict[str, Result], args: argparse.Namespace) -> None:
    ceiling = results["ceiling (GET /health)"]
    auth = ", an API key on each request" if args.api_key else ""
    print(
        f"runpoint serve, 1 worker; wrk -t2 -c{args.connections} -d{args.duration}s on loopback"
        + auth
    )
    print(f"{'endpoint':<24}{'req/s':>10}{'p50 ms':>10}{'p99 ms':>10}{'of ceiling':>12}")
    for r in results.values():
        share = r.rps / ceiling.rps
        print(f"{r.name:<24}{r.rps:>10.0f}{r.p50_ms:>10.2f}{r.p99_ms:>10.2f}{share:>11.0%}")
    small, large = results["timeline       10 msgs"], results["timeline    10000 msgs"]
    share = small.rps / ceiling.rps
    growth = large.p50_ms / small.p50_ms
    print(
        f"target: timeline >= 50% of the ceiling's req/s: {share:.0%} "
        f"({'met' if share >= 0.5 else 'NOT met'})"
    )
    print(
        f"target: timeline p50 at 10,000 msgs <= 1.5x at 10: {growth:.2f}x "
        f"({'met' if growth <= 1.5 else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
