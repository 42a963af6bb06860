"""Start-up benchmark: how soon `runpoint serve` answers and a CLI command exits.

    .venv/bin/python contrib/bench/startup.py [--rounds 5] [--top 12]

Times, from exec, `runpoint serve`'s first 200 from /health (the demo agents on a fresh
SQLite file) and the exit of `runpoint session lock` (on a database already migrated),
and prints the median and best of the rounds, then where the import time of each goes
(`python -X importtime`, cumulative time by package).
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
RUNPOINT = shutil.which("runpoint", path=str(BIN)) or "runpoint"
CLI_MODULE = ["-X", "importtime", "-m", "runpoint.adapters.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("RUNPOINT_")}


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError):
        return False


def serve_until_healthy(command: list[str], db: Path) -> tuple[float, str]:
    """Seconds from exec to the first 200 from /health, and the server's stderr."""
    port = free_port()
    log = db.with_suffix(".stderr")  # a file, not a pipe: nobody reads it while it serves
    with log.open("w") as stderr:
        started = time.perf_counter()
        process = subprocess.Popen(
            [*command, "serve", "--port", str(port), "--db", str(db), "--log-level", "warning"],
            stderr=stderr,
            env=environment(),
        )
        try:
            while not answers(f"http://127.0.0.1:{port}/health"):
                if process.poll() is not None:
                    raise SystemExit(f"runpoint serve exited: {log.read_text()}")
                time.sleep(0.005)
            elapsed = time.perf_counter() - started
        finally:
            process.terminate()
            process.wait(timeout=30)
    return elapsed, log.read_text()


def lock(command: list[str], db: Path) -> tuple[float, str]:
    """Seconds from exec to the exit of `runpoint session lock`, and its stderr."""
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "session", "lock", "demo", "--db", str(db)],
        capture_output=True,
        text=True,
        env=environment(),
    )
    return time.perf_counter() - started, done.stderr


def import_breakdown(stderr: str, top: int) -> list[tuple[str, float]]:
    """Cumulative import seconds by package, from `-X importtime` output: each package
    counted where something outside it first imported it (so a package another imports
    is in both figures)."""
    totals: collections.Counter[str] = collections.Counter()
    # -X importtime prints a module after its imports: the ones just above it, one level
    # deeper, are its children; a line's package is counted unless its parent's is the same
    lines: list[tuple[int, int, str]] = []
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, total, name = line.removeprefix("import time:").split("|")
            if total.strip().isdigit():
                depth = (len(name) - len(name.lstrip())) // 2
                lines.append((depth, int(total), name.strip().split(".")[0]))
    parents: dict[int, str] = {}
    for depth, cumulative, package in reversed(lines):  # parents come after their children
        parents[depth] = package
        if depth == 0 or parents.get(depth - 1) != package:
            totals[package] += cumulative  # microseconds
    return [(package, us / 1e6) for package, us in totals.most_common(top)]


def report(title: str, times: list[float], stderr: str, top: int) -> None:
    print(f"{title}: median {statistics.median(times):.3f} s, best {min(times):.3f} s")
    for package, seconds in import_breakdown(stderr, top):
        print(f"    {seconds:7.3f} s  {package}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=12, help="packages in each breakdown")
    args = parser.parse_args()
    profiled = [sys.executable, *CLI_MODULE]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        dbs = [directory / f"serve-{i}.db" for i in range(args.rounds + 1)]
        health = [serve_until_healthy([RUNPOINT], db)[0] for db in dbs[1:]]
        _, serve_imports = serve_until_healthy(profiled, dbs[0])
        report("runpoint serve -> first /health", health, serve_imports, args.top)
        migrated = dbs[-1]
        exits = [lock([RUNPOINT], migrated)[0] for _ in range(args.rounds)]
        report("runpoint session lock -> exit", exits, lock(profiled, migrated)[1], args.top)


if __name__ == "__main__":
    main()
