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


def http_round(
    tmp: str, r: int, sides: dict[str, list[str]], vendor: str, calls: int, cold: int, repeats: int
) -> dict[str, list[list[float]]]:
    """One round over HTTP, each side (`runpoint serve` options) on a database of its own,
    the sides' servers up at once and their requests alternating. A server of each side
    builds 1 + 2 x `cold` runs of `calls` tool calls, each in a session of its own; then a
    new one is warmed on the first run (`repeats` reads of each kind), then reads the
    timeline of `cold` other runs and the middle snapshot of the last `cold`, each once;
    then the first run's, `repeats` times. By side, the server's CPU ms per `HTTP_LABELS`
    (the first run, which pays for what a new server makes at first use, left out of the
    turns)."""
    databases = {name: f"{tmp}/http-{name}-{r}.db" for name in sides}
    figures: dict[str, list[list[float]]] = {name: [[] for _ in HTTP_LABELS] for name in sides}
    runs: dict[str, list[str]] = {name: [] for name in sides}
    with contextlib.ExitStack() as stack:
        builders = {n: stack.enter_context(serving(databases[n], o)) for n, o in sides.items()}
        for i in range(1 + 2 * cold):
            form = {"message": f"calls: {calls}", "stream": "false", "session_id": f"s{i}"}
            for name, (pid, http) in builders.items():
                built = measure(http, pid, vendor, "/agents/bench/runs", form)
                runs[name].append(built.run_id)
                if i:
                    figures[name][0].append(built.cpu_per_turn_ms)
    with contextlib.ExitStack() as stack:
        readers = {n: stack.enter_context(serving(databases[n], o)) for n, o in sides.items()}

        def read(name: str, i: int, path: str) -> float:
            pid, http = readers[name]
            cpu = cpu_seconds(pid)
            run = f"/agents/bench/runs/{runs[name][i]}"
            http.get(f"{run}{path}", params={"session_id": f"s{i}"}).raise_for_status()
            return 1000 * (cpu_seconds(pid) - cpu)

        timeline, snapshot = "/checkpoints", f"/checkpoints/{1 + 2 * (calls // 2)}"
        for _ in range(repeats):
            for name in sides:
                read(name, 0, timeline), read(name, 0, snapshot)
        reads = (
            (timeline, range(1, 1 + cold)),
            (snapshot, range(1 + cold, 1 + 2 * cold)),
            (timeline, [0] * repeats),
            (snapshot, [0] * repeats),
        )
        for row, (path, indexes) in enumerate(reads, 1):
            for i in indexes:
                for name in sides:
                    figures[name][row].append(read(name, i, path))
    return figures


def over_http(messages: int, rounds: int, cold: int, repeats: int) -> dict[str, list[list[float]]]:
    """`rounds` rounds (`http_round`) over runs of `messages` messages, with (sealed) and
    without (clear) a keyring: by side, each of `HTTP_LABELS`' samples."""
    samples: dict[str, list[list[float]]] = {
        n: [[] for _ in HTTP_LABELS] for n in ("clear", "sealed")
    }
    with vendor_server() as vendor, tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys"  # Keyring.from_file's format
        keys.write_text(f"bench-1 {base64.b64encode(os.urandom(32)).decode()}\n")
        sides = {"clear": [], "sealed": ["--encryption-keys", str(keys)]}
        for r in range(rounds):
            found = http_round(tmp, r, sides, vendor, messages // 2 - 1, cold, repeats)
            for name, figures in found.items():
                for row, figure in zip(samples[name], figures, strict=True):
                    row.extend(figure)
    return samples
