"""The users' clients' second server: `runpoint serve` of the long agent
(tests/long_runs.py), whose runs are long enough to be packed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.serving import serving

LONG = "75 batches"  # the long agent's input: 152 messages, two windows packed


@pytest.fixture(scope="module")
def long_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = tmp_path_factory.mktemp("serve") / "runpoint.db"
    with serving(db, "--app", "tests.long_runs:agents") as base_url:
        yield base_url
