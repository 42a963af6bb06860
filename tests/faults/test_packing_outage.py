"""PostgreSQL goes away as a long run's first window is settled (plugins/sql/packs.py):
restarted (`pg_ctl stop -m immediate`, started again), or its connections cut by the
outage drill's proxy, on the save that completes the window (cut once its commit is done
and before its answer is back) or on the packing right after it (its rows deleted, the
pack not yet written).

The run outlives it (its writes are retried within its lease) and completes; nothing is
lost or written twice: its transcript, checkpoints and events read back exactly, from a
new process. A window whose packing failed reads as its rows meanwhile and is packed at
the run's next save."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from runpoint.core.types import Run
from runpoint.facade import Runpoint
from runpoint.plugins.sql import packing, packs
from tests import postgres
from tests.faults.test_database_outage import DOWN_SECONDS, LEASE_SECONDS, CuttingProxy
from tests.long_runs import AGENT, a_long_run, assert_read_back, packed, transcript
from tests.storage.test_lean_events import Handed

pytestmark = pytest.mark.skipif(not postgres.available(), reason="PostgreSQL is not installed")


class Outage:
    """A fault that lands once, when `landed` is awaited: PostgreSQL restarted (back
    after DOWN_SECONDS, in the background) or every connection through the proxy cut."""

    def __init__(self, pg: postgres.TemporaryServer, proxy: CuttingProxy, kind: str) -> None:
        self.pg, self.proxy, self.kind = pg, proxy, kind
        self.fired = False
        self.back: asyncio.Task[None] | None = None

    async def landed(self) -> None:
        self.fired = True
        if self.kind == "cut":
            assert await asyncio.to_thread(self.proxy.cut), "no connection to cut"
            return
        await asyncio.to_thread(self.pg.crash)
        self.back = asyncio.create_task(self._start_again())

    async def _start_again(self) -> None:
        await asyncio.sleep(DOWN_SECONDS)
        await asyncio.to_thread(self.pg.start_again)

    async def committed_unanswered(self, save: Awaitable[None], landed: Callable[[], Any]) -> None:
        """`save` with its answer held back until `landed()` (a read of PostgreSQL's own)
        says it committed, then the connections cut: its outcome unknown to the writer."""
        self.proxy.answering.clear()
        saving = asyncio.ensure_future(save)
        try:
            began = time.monotonic()
            while not await landed():
                assert time.monotonic() - began < LEASE_SECONDS, "the save did not commit"
                await asyncio.sleep(0.02)
            await self.landed()
        finally:
            self.proxy.answering.set()
        await saving


class Faulted(Handed):
    """Meets the outage on the save that completes the run's first window (`at`: "save"),
    or lets it through (the outage is then the packing's: see the test)."""

    def __init__(self, url: str, outage: Outage, at: str, direct: str) -> None:
        super().__init__(url)
        self.fault, self.at, self.direct = outage, at, direct
        self.attempts = 0  # of the save that completes the window

    async def save(self, run: Run, *args: Any, **kwargs: Any) -> None:
        messages = args[0]
        completes = run.message_count - len(messages) < packs.WINDOW <= run.message_count
        self.attempts += completes
        if not completes or self.at != "save" or self.fault.fired:
            return await super().save(run, *args, **kwargs)
        if self.fault.kind == "restart":
            await self.fault.landed()
            return await super().save(run, *args, **kwargs)
        query = f"SELECT revision FROM runs WHERE run_id = '{run.run_id}'"
        revision = run.revision

        async def landed() -> bool:
            return bool(await postgres.fetch_value(self.direct, query) > revision)

        await self.fault.committed_unanswered(super().save(run, *args, **kwargs), landed)


@pytest.mark.parametrize("kind", ["restart", "cut"])
@pytest.mark.parametrize("at", ["save", "packing"])
async def test_a_long_run_outlives_an_outage_as_its_window_is_settled(
    pg: postgres.TemporaryServer,
    kind: str,
    at: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    proxy = CuttingProxy(pg.port)
    outage = Outage(pg, proxy, kind)
    insert = packing._insert

    async def inserted_after_the_outage(*args: Any) -> None:  # the rows deleted already
        if at == "packing" and not outage.fired:
            await outage.landed()
        await insert(*args)

    monkeypatch.setattr(packing, "_insert", inserted_after_the_outage)
    caplog.set_level(logging.INFO, logger=packing.log.name)
    through = pg.url.replace(f":{pg.port}/", f":{proxy.port}/")
    storage = Faulted(through, outage, at, pg.url)
    try:
        async with Runpoint([AGENT], storage=storage, lease_seconds=LEASE_SECONDS) as rp:
            run = await a_long_run(rp)
            if outage.back is not None:
                await outage.back
    finally:
        proxy.close()
    assert outage.fired
    left = [r for r in caplog.records if "left unpacked" in r.getMessage()]
    if at == "save":  # written, answer lost or not: the retry found it, then packed
        assert storage.attempts >= 2 and left == []
    else:
        (told,) = left
        assert told.args[0] == run.run_id and told.args[1] == [(0, packs.WINDOW)]  # type: ignore[index]
    count = len(transcript("go"))
    layout = [(0, packs.WINDOW), (packs.WINDOW, count - packs.WINDOW)]
    assert await packed(pg.url, "messages", run.run_id) == layout
    async with Runpoint([AGENT], database=pg.url) as rp:  # nothing kept opened
        await assert_read_back(rp, run.run_id, "go", storage.handed)
