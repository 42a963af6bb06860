"""Fixtures for the HTTP tests: the app in process (`runpoint serve` on loopback is the
`server` fixture of tests/conftest.py)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from pathlib import Path

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
