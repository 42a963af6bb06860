"""Start-up benchmark: how soon `runpoint serve` answers and a CLI command exits.

    .venv/bin/python contrib/bench/startup.py [--rounds 5] [--top 12]

Times, from exec, `runpoint serve`'s first 200 from /health (the demo agents on SQLite:
a restart, on a database at the head revision, and a first start, on a new file, which
runs the migrations) and the exit of `runpoint session lock` (on a migrated database), and
prints the median and best of the rounds, of the time and of the CPU time the process
used (which other work on a shared machine disturbs less), then where the import time of
each goes (`python -X importtime`, cumulative time by package); then, for scale, the same
for a bare interpreter importing only the libraries runpoint cannot start without; and the
load average before and after.

The commands run as an installed runpoint does, with its bytecode written (without
PYTHONDONTWRITEBYTECODE, which would compile every module of runpoint at every start),
after one round that is not counted.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
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
from typing import NamedTuple

BIN = Path(sys.executable).parent
RUNPOINT = shutil.which("runpoint", path=str(BIN)) or "runpoint"
CLI_MODULE = ["-X", "importtime", "-m", "runpoint.adapters.cli"]
# the libraries a server on SQLite, and a command on it, import whatever runpoint does
FLOORS = ["import litestar, sqlalchemy.ext.asyncio, uvicorn", "import sqlalchemy.ext.asyncio"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def environment() -> dict[str, str]:
    unset = ("RUNPOINT_", "PYTHONDONTWRITEBYTECODE")
    return {k: v for k, v in os.environ.items() if not k.startswith(unset)}


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError):
        return False


class Timing(NamedTuple):
    """From exec: the seconds that passed, and the CPU seconds the process used (on a
    shared machine the second waits less on the others)."""

    wall: float
    cpu: float


def cpu_seconds(pid: int) -> float:
    """The CPU time a live process has used (Linux: /proc/PID/stat, utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve_until_healthy(command: list[str], db: Path) -> tuple[Timing, str]:
    """The time from exec to the first 200 from /health, and the server's stderr."""
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
            timing = Timing(time.perf_counter() - started, cpu_seconds(process.pid))
        finally:
            process.terminate()
            process.wait(timeout=30)
    return timing, log.read_text()


def exits(command: list[str]) -> tuple[Timing, str]:
    """The time from exec to the exit of `command`, and its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=environment())
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return Timing(wall, cpu), done.stderr


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


def report(title: str, timings: list[Timing], stderr: str, top: int) -> None:
    walls, cpus = [t.wall for t in timings], [t.cpu for t in timings]
    print(
        f"{title}: median {statistics.median(walls):.3f} s, best {min(walls):.3f} s "
        f"(CPU: median {statistics.median(cpus):.3f} s, best {min(cpus):.3f} s)"
    )
    for package, seconds in import_breakdown(stderr, top):
        print(f"    {seconds:7.3f} s  {package}")


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--top", type=int, default=12, help="packages in each breakdown")
    args = parser.parse_args()
    profiled = [sys.executable, *CLI_MODULE]
    print(f"load average {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        migrated = directory / "migrated.db"
        serve_until_healthy([RUNPOINT], migrated)  # not counted: it writes the bytecode
        restarts = [serve_until_healthy([RUNPOINT], migrated)[0] for _ in range(args.rounds)]
        _, imports = serve_until_healthy(profiled, migrated)
        report("runpoint serve -> first /health, a restart", restarts, imports, args.top)
        new = [directory / f"new-{i}.db" for i in range(args.rounds + 1)]
        firsts = [serve_until_healthy([RUNPOINT], db)[0] for db in new[1:]]
        _, imports = serve_until_healthy(profiled, new[0])
        report("runpoint serve -> first /health, a new database", firsts, imports, args.top)
        lock = ["session", "lock", "demo", "--db", str(migrated)]
        timings = [exits([RUNPOINT, *lock])[0] for _ in range(args.rounds)]
        report("runpoint session lock -> exit", timings, exits([*profiled, *lock])[1], args.top)
    for imports in FLOORS:  # what runpoint cannot do without, for scale
        timings = [exits([sys.executable, "-c", imports])[0] for _ in range(args.rounds)]
        report(f"python -c {imports!r} -> exit", timings, "", 0)
    print(f"load average {load()}")


if __name__ == "__main__":
    main()
