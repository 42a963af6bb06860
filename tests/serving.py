"""`runpoint serve` as a client meets it: started on a free loopback port, waited for until
it answers /health, stopped after."""

from __future__ import annotations

import contextlib
import random
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx


def free_port() -> int:
    """A loopback port free now, outside the kernel's range of ephemeral ports: a server
    started on it a moment later (or again, after a kill) cannot find it taken by some
    client's connection, whose own end takes a port from that range."""
    ranges = Path("/proc/sys/net/ipv4/ip_local_port_range")
    low = int(ranges.read_text().split()[0]) if ranges.exists() else 32768
    while True:
        port = _PORTS.randrange(10000, low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # taken
                continue
            return port


_PORTS = random.SystemRandom()  # not `random`'s, which each xdist worker seeds alike


def await_health(
    process: subprocess.Popen[Any],
    base_url: str,
    *,
    seconds: float = 20,
    exited: Callable[[], str] = lambda: "runpoint serve exited",
    path: str = "/health",
) -> None:
    """Wait for a started `runpoint serve` (or another server) to answer `path` with a 200
    (`exited` says why it did not)."""
    deadline = time.monotonic() + seconds
    while True:
        assert process.poll() is None, exited()
        try:
            if httpx.get(f"{base_url}{path}").status_code == 200:
                return
        except httpx.TransportError:
            assert time.monotonic() < deadline, f"{base_url} did not come up"
            time.sleep(0.05)


@contextlib.contextmanager
def serving(db: Path | str, *options: str, host: str = "127.0.0.1") -> Iterator[str]:
    """`runpoint serve` (the demo agents) with these options on a free port of `host`, on
    `db` (a SQLite file or a database URL)."""
    port = free_port()
    command = shutil.which("runpoint", path=str(Path(sys.executable).parent))
    assert command, "the runpoint command is not installed next to this Python"
    address = ["--host", host, "--port", str(port)]
    process = subprocess.Popen(
        [command, "serve", *address, "--db", str(db), "--log-level", "warning", *options]
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        await_health(process, base_url, seconds=60)  # a shared, busy machine starts slowly
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)
