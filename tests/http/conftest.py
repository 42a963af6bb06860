"""Fixtures for the HTTP tests: the app in process, and `runpoint serve` on loopback."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from litestar import Litestar
from litestar.testing import AsyncTestClient

from runpoint.adapters import auth
from runpoint.adapters.litestar import create_app
from runpoint.plugins.demo import agents

SPEC = Path(__file__).parents[2] / "openapi" / "openapi.yaml"
# API keys: key -> (team, user, scopes)
KEYS = {
    "alpha-key": ("alpha", "ada", ["read", "write"]),
    "beta-key": ("beta", "bob", ["read", "write"]),
    "alpha-reader-key": ("alpha", "rita", ["read"]),
}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def write_keys(path: Path) -> Path:
    """A keys file for KEYS, as an operator writes it: SHA-256s, not keys."""
    entries = [
        {"sha256": hashlib.sha256(key.encode()).hexdigest(), "team": t, "user": u, "scopes": s}
        for key, (t, u, s) in KEYS.items()
    ]
    path.write_text(yaml.safe_dump({"keys": entries}))
    return path


@pytest.fixture
def keyed_auth(tmp_path: Path) -> auth.Auth:
    return auth.load(api_keys_file=str(write_keys(tmp_path / "keys.yaml")))


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


def await_health(
    process: subprocess.Popen[Any],
    base_url: str,
    *,
    seconds: float = 20,
    exited: Callable[[], str] = lambda: "runpoint serve exited",
) -> None:
    """Wait for a started `runpoint serve` to answer /health (`exited` says why it did not)."""
    deadline = time.monotonic() + seconds
    while True:
        assert process.poll() is None, exited()
        try:
            if httpx.get(f"{base_url}/health").status_code == 200:
                return
        except httpx.TransportError:
            assert time.monotonic() < deadline, "runpoint serve did not come up"
            time.sleep(0.05)


@contextlib.contextmanager
def serving(db: Path, *options: str, host: str = "127.0.0.1") -> Iterator[str]:
    """`runpoint serve` (the demo agents) with these options on a free port of `host`."""
    port = free_port()
    command = shutil.which("runpoint", path=str(Path(sys.executable).parent))
    assert command, "the runpoint command is not installed next to this Python"
    address = ["--host", host, "--port", str(port)]
    process = subprocess.Popen(
        [command, "serve", *address, "--db", str(db), "--log-level", "warning", *options]
    )
    base_url = f"http://127.0.0.1:{port}"
    try:
        await_health(process, base_url)
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`runpoint serve` (the demo agents) on a free loopback port with a fresh database."""
    with serving(tmp_path_factory.mktemp("serve") / "runpoint.db") as base_url:
        yield base_url
