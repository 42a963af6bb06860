"""A row of an encrypted database that does not open is the documented INTEGRITY_ERROR,
named by its ids (no content, no traceback), logged and counted; other rows serve."""

from __future__ import annotations

import logging
import os

import pytest
from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families

from runpoint.adapters.litestar import create_app
from runpoint.core.keyring import Keyring
from runpoint.plugins.demo import agents
from tests.storage.test_encryption import swap

RUNS = "/agents/travel-agent/runs"


async def test_a_swapped_ciphertext_is_an_integrity_error(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    keyring = Keyring({"k1": os.urandom(32)})
    app = create_app(agents, database=database, keyring=keyring)
    async with AsyncTestClient(app) as client:
        made = []
        for city in ("Paris", "Lima", "Oslo"):
            answer = await client.post(RUNS, data={"message": city, "stream": "false"})
            assert answer.status_code == 200, answer.text
            made.append(answer.json())
    first, second, third = (run["run_id"] for run in made)
    await swap(database, "runs", "state", "run_id = :k", first, second)
    await swap(database, "messages", "data", "idx = 0 AND run_id = :k", first, second)
    app = create_app(agents, database=database, keyring=keyring)
    async with AsyncTestClient(app) as client:
        caplog.set_level(logging.ERROR)
        read = await client.get(f"{RUNS}/{first}", params={"session_id": made[0]["session_id"]})
        assert read.status_code == 500
        assert read.json() == {
            "detail": f"stored row runs({first}).state cannot be read: failed authentication "
            "(altered, or another row's)",
            "error_code": "INTEGRITY_ERROR",
        }
        logged = [r.getMessage() for r in caplog.records]
        assert any(f"runs({first}).state" in line for line in logged)
        assert not any(r.exc_info for r in caplog.records)  # no traceback
        assert "Paris" not in read.text
        # the rows not swapped serve
        other = await client.get(f"{RUNS}/{third}", params={"session_id": made[2]["session_id"]})
        assert other.status_code == 200 and "Oslo" in other.text
        scrape = (await client.get("/metrics")).text
        counted = [
            s.value
            for family in text_string_to_metric_families(scrape)
            if family.name == "runpoint_integrity_failures"
            for s in family.samples
            if s.name.endswith("_total")
        ]
        assert counted == [1.0]
