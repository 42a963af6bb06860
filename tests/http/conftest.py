"""Fixtures for the HTTP tests: the app in process, and `runpoint serve` on loopback."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from runpoint.adapters.litestar import create_app
from runpoint.plugins.demo import agents

SPEC = Path(__file__).parents[2] / "openapi" / "openapi.yaml"


@pytest.fixture
def app(database: str) -> Litestar:
    return create_app(agents, database=database)


@pytest.fixture
async def client(app: Litestar) -> AsyncIterator[AsyncTestClient[Litestar]]:
    async with AsyncTestClient(app) as client:
        yield client


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`runpoint serve` (the demo agents) on a free loopback port with a fresh database."""
    port = free_port()
    command = shutil.which("runpoint", path=str(Path(sys.executable).parent))
    assert command, "the runpoint command is not installed next to this Python"
    db = tmp_path_factory.mktemp("serve") / "runpoint.db"
    process = subprocess.Popen(
        [command, "serve", "--port", str(port), "--db", str(db), "--log-level", "warning"]
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            assert process.poll() is None, "runpoint serve exited"
            try:
                if httpx.get(f"{base_url}/health").status_code == 200:
                    break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "runpoint serve did not come up"
                time.sleep(0.05)
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)
