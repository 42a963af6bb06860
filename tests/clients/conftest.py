"""Fixtures for the client tests: `runpoint serve` on loopback, as a client meets it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.http.conftest import serving


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`runpoint serve` (the demo agents) on a free loopback port with a fresh database."""
    with serving(tmp_path_factory.mktemp("serve") / "runpoint.db") as base_url:
        yield base_url
