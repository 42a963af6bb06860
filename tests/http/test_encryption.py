"""A row of an encrypted database that does not open is the documented INTEGRITY_ERROR,
named by its ids (no content, no traceback), logged and counted; other rows serve."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest
from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families

from runpoint.adapters.litestar import create_app
from runpoint.core.keyring import Keyring
from runpoint.core.sealing import Codec
from runpoint.core.tenancy import DEFAULT_TEAM
from runpoint.plugins.demo import agents
from runpoint.plugins.sql import encryption
from runpoint.seams.host import PluginHost
from runpoint.seams.storage import Encrypted, ErasesTeams
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


async def test_an_erased_teams_runs_are_the_integrity_error_then_404(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(encryption, "WATCH_SECONDS", 0.05)
    keyring = Keyring({"k1": os.urandom(32)})
    async with AsyncTestClient(create_app(agents, database=database, keyring=keyring)) as client:
        made = await client.post(RUNS, data={"message": "Paris", "stream": "false"})
        run_id, session_id = made.json()["run_id"], made.json()["session_id"]
        read = f"{RUNS}/{run_id}"
        assert (await client.get(read, params={"session_id": session_id})).status_code == 200

        # another process erases the open server's team
        storage = PluginHost().storage(database)
        assert isinstance(storage, Encrypted) and isinstance(storage, ErasesTeams)
        storage.encrypt_with(Codec(keyring))
        await storage.open()
        try:
            assert await storage.erase_team(DEFAULT_TEAM)
            await asyncio.sleep(0.5)  # the server drops the key it held
            refused = await client.get(read, params={"session_id": session_id})
            assert refused.status_code == 500
            assert refused.json()["error_code"] == "INTEGRITY_ERROR"
            assert "which was erased" in refused.json()["detail"]
            assert "Paris" not in refused.text
            while await storage.remove_erased(10) is not None:
                pass
        finally:
            await storage.close()
        gone = await client.get(read, params={"session_id": session_id})
        assert gone.status_code == 404, gone.text
        # the team goes on, under a new key
        again = await client.post(RUNS, data={"message": "Lima", "stream": "false"})
        assert again.status_code == 200 and "Lima" in again.text
