"""A run killed with SIGKILL resumes from its last checkpoint without re-running tools."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from runpoint.core.errors import Conflict
from runpoint.core.types import RunStatus
from runpoint.facade import ContinueRun, Runpoint
from tests.kernel import crashing


async def test_a_killed_run_resumes_without_rerunning_completed_batches(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "calls.txt"
    run_id = await crashing.kill(database, counter)
    assert counter.read_text().split() == ["Paris", "Tokyo"]

    monkeypatch.setenv("COUNTER", str(counter))
    # by hand here; tests/kernel/test_recovery.py lets the lease watch do it
    async with Runpoint([crashing.agent], database=database, recover=False) as rp:
        detail = await rp.get_run(run_id)
        assert detail.run.status is RunStatus.RUNNING  # as it was when it died
        assert detail.run.last_checkpoint_at_message_index == 5
        assert [t.result for t in detail.tools] == ["Paris: many", "Tokyo: many"]
        assert detail.run.lease_expires_at is not None
        if detail.run.lease_expires_at > time.time():
            with pytest.raises(Conflict, match="executing in another process"):
                await rp.continue_run(ContinueRun(run_id=run_id))
            await asyncio.sleep(detail.run.lease_expires_at - time.time())

        run = await (await rp.continue_run(ContinueRun(run_id=run_id))).result()
        _, timeline = await rp.timeline(run_id)
    assert (run.run_id, run.status) == (run_id, RunStatus.COMPLETED)
    assert counter.read_text().split() == ["Paris", "Tokyo", "Lagos"]  # each ran once
    assert [(c.message_index, c.reason) for c in timeline] == [
        (3, "checkpoint"),
        (5, "checkpoint"),
        (7, "checkpoint"),
        (8, "end"),
    ]
    assert run.content == (
        "Here is what I found. Paris: Paris: many; Tokyo: Tokyo: many; Lagos: Lagos: many."
    )
