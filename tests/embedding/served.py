"""The FastAPI host of hosts.py with runpoint at PREFIX, served by uvicorn on a free loopback
port, as an app that embeds runpoint is deployed."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.serving import await_health, free_port

from .hosts import PREFIX

ROOT = Path(__file__).parents[2]


@contextlib.contextmanager
def served_host(db: Path) -> Iterator[str]:
    """The host's base URL (runpoint is at its PREFIX)."""
    port = free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "--factory", "tests.embedding.hosts:served"),
            *("--port", str(port), "--log-level", "warning"),
        ],
        cwd=ROOT,
        env={**os.environ, "RUNPOINT_DB": str(db)},
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        # it imports four frameworks (hosts.py): on a loaded machine that is not quick
        await_health(process, f"{base_url}{PREFIX}", seconds=120)
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)
