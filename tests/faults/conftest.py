"""The fault tests' PostgreSQL: a server of each test's own, as they stop it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import postgres


@pytest.fixture
def pg() -> Iterator[postgres.TemporaryServer]:
    """A server of the test's own: it is stopped and started again."""
    bin_dir = postgres.binaries()
    assert bin_dir is not None
    server = postgres.TemporaryServer(bin_dir)
    server.start()
    try:
        yield server
    finally:
        server.stop()
