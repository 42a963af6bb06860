"""`runpoint serve`'s access options, over real HTTP: it refuses to serve beyond loopback
with no authentication unless told to, and applies the keys, rate limit and body size it
is given."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from runpoint.adapters.cli import is_loopback
from tests.serving import serving

from .conftest import bearer, write_keys

RUNS = "/agents/travel-agent/runs"


def serve_and_exit(*options: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """`runpoint serve` with these options and RUNPOINT_ variables only (it should exit)."""
    command = shutil.which("runpoint", path=str(Path(sys.executable).parent))
    assert command
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOINT_")} | environment
    return subprocess.run(
        [command, "serve", *options], capture_output=True, text=True, timeout=60, env=env
    )


def test_an_open_server_refuses_an_address_beyond_loopback(tmp_path: Path) -> None:
    refused = serve_and_exit("--host", "0.0.0.0", "--db", str(tmp_path / "runpoint.db"))
    assert refused.returncode == 2
    assert "refusing to serve 0.0.0.0 with no authentication" in refused.stderr
    assert "--allow-unauthenticated" in refused.stderr
    assert not (tmp_path / "runpoint.db").exists()  # nothing was opened


def test_the_environment_may_allow_an_open_server_and_zero_does_not(tmp_path: Path) -> None:
    db = str(tmp_path / "runpoint.db")
    refused = serve_and_exit("--host", "0.0.0.0", "--db", db, RUNPOINT_ALLOW_UNAUTHENTICATED="0")
    assert "refusing to serve 0.0.0.0" in refused.stderr


def test_bad_access_options_fail_at_once() -> None:
    refused = serve_and_exit("--rate-limit", "lots")
    assert refused.returncode == 2
    assert "a rate limit is COUNT/UNIT" in refused.stderr
    refused = serve_and_exit("--api-keys", "/nonexistent/keys.yaml")
    assert refused.returncode == 2
    assert "No such file" in refused.stderr


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.9", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("192.168.1.20", False), ("example.com", False)],
)  # fmt: skip
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_an_open_server_beyond_loopback_when_told_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(tmp_path / "runpoint.db", "--allow-unauthenticated", host="0.0.0.0") as url:
        assert httpx.get(f"{url}/sessions").status_code == 200
    monkeypatch.setenv("RUNPOINT_ALLOW_UNAUTHENTICATED", "1")  # the same, said by the env
    with serving(tmp_path / "runpoint.db", host="0.0.0.0") as url:
        assert httpx.get(f"{url}/sessions").status_code == 200


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[str]:
    keys = write_keys(tmp_path / "keys.yaml")
    options = ["--api-keys", str(keys), "--rate-limit", "5/minute", "--max-body-bytes", "2000"]
    with serving(tmp_path / "runpoint.db", *options, host="0.0.0.0") as url:
        yield url


def test_a_server_with_keys_serves_beyond_loopback_and_applies_its_limits(secured: str) -> None:
    with httpx.Client(base_url=secured, timeout=30) as client:
        assert client.get("/sessions").status_code == 401
        alpha = bearer("alpha-key")
        assert client.get("/sessions", headers=alpha).status_code == 200

        def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
            yield b'{"message": "'
            yield from [b"x" * 100] * 30
            yield b'"}'

        headers = {**alpha, "Content-Type": "application/json"}
        too_large = client.post(RUNS, content=chunks(), headers=headers)
        assert "content-length" not in too_large.request.headers
        assert too_large.status_code == 413
        statuses = [client.get("/agents", headers=alpha).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
