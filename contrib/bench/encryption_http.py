"""encryption.py's part over HTTP, the path users take: `runpoint serve` processes on
SQLite, with and without a keyring (`--encryption-keys`), build runs through the OpenAI
provider (`POST /agents/bench/runs`, `stream=false`, against providers.py's vendor) and
serve their timeline and snapshot reads; the figures are each server process's CPU
(`vs_agno.cpu_seconds`) per model turn and per request. Run it through encryption.py."""

from __future__ import annotations

import base64
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, for tests.serving
from providers import agent, vendor_server
from vs_agno import HERE, cpu_seconds, measure, server

from tests.serving import free_port

# what `runpoint serve --app encryption_http:agents` serves: the runs' agent
agents = [agent("openai")]

HTTP_LABELS = (
    "CPU per model turn (POST .../runs, stream=false)",
    "timeline GET, cold (the run's first request)",
    "snapshot GET at the middle, cold (the run's first request)",
    "timeline GET, repeated (its encoded document kept)",
    "snapshot GET at the middle, repeated (document kept)",
)


@contextlib.contextmanager
def serving(database: str, options: list[str]) -> Iterator[tuple[int, httpx.Client]]:
    """A new `runpoint serve` of `agents` on `database`: its process id and a client."""
    port = free_port()
    argv = [sys.executable, "-m", "runpoint.adapters.cli", "serve", "--app"]
    argv += ["encryption_http:agents", "--db", database, *options, "--port", str(port)]
    with (
        server(argv, port, HERE) as process,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as http,
    ):
        yield process.pid, http


def served(
    database: str, options: list[str], vendor: str, calls: int, cold: int, repeats: int
) -> list[list[float]]:
    """One side of a round (`runpoint serve` options). A server builds 1 + 2 x `cold` runs
    of `calls` tool calls, each in a session of its own; then a new one on that database is
    warmed on the first run (`repeats` reads of each kind), then reads the timeline of
    `cold` other runs and the middle snapshot of the last `cold`, each once; then the first
    run's, `repeats` times. The server's CPU ms per `HTTP_LABELS` (the first run, which pays
    for what a new server makes at first use, left out of the turns)."""
    with serving(database, options) as (pid, http):
        form = {"message": f"calls: {calls}", "stream": "false"}
        built = [
            measure(http, pid, vendor, "/agents/bench/runs", form | {"session_id": f"s{i}"})
            for i in range(1 + 2 * cold)
        ]
    with serving(database, options) as (pid, http):

        def read(i: int, path: str) -> float:
            cpu = cpu_seconds(pid)
            run = f"/agents/bench/runs/{built[i].run_id}"
            http.get(f"{run}{path}", params={"session_id": f"s{i}"}).raise_for_status()
            return 1000 * (cpu_seconds(pid) - cpu)

        timeline, snapshot = "/checkpoints", f"/checkpoints/{1 + 2 * (calls // 2)}"
        for _ in range(repeats):
            read(0, timeline), read(0, snapshot)
        return [
            [b.cpu_per_turn_ms for b in built[1:]],
            [read(i, timeline) for i in range(1, 1 + cold)],
            [read(i, snapshot) for i in range(1 + cold, 1 + 2 * cold)],
            [read(0, timeline) for _ in range(repeats)],
            [read(0, snapshot) for _ in range(repeats)],
        ]


def over_http(messages: int, rounds: int, cold: int, repeats: int) -> dict[str, list[list[float]]]:
    """`rounds` rounds of `served` over runs of `messages` messages, without (clear) and
    with (sealed) a keyring, one side after the other, the first side each round taking
    turns (a drift of the machine's load falls on both): by side, `HTTP_LABELS`' samples.
    (Both sides' servers up at once, their requests alternating, made the clear reads
    dearer, and so the ratio smaller, than either server alone shows: each likely finding
    the CPU's caches filled by its twin.)"""
    samples: dict[str, list[list[float]]] = {
        n: [[] for _ in HTTP_LABELS] for n in ("clear", "sealed")
    }
    with vendor_server() as vendor, tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys"  # Keyring.from_file's format
        keys.write_text(f"bench-1 {base64.b64encode(os.urandom(32)).decode()}\n")
        sides = [("clear", []), ("sealed", ["--encryption-keys", str(keys)])]
        for r in range(rounds):
            for name, options in sides if r % 2 == 0 else sides[::-1]:
                database = f"{tmp}/http-{name}-{r}.db"
                figures = served(database, options, vendor, messages // 2 - 1, cold, repeats)
                for row, figure in zip(samples[name], figures, strict=True):
                    row.extend(figure)
    return samples
