"""The run queue on PostgreSQL: pgqueuer, its jobs in runpoint's own database.

pgqueuer is asyncpg-native (asyncpg is runpoint's PostgreSQL driver already), hands a job
to one worker with FOR UPDATE SKIP LOCKED, wakes idle workers with LISTEN/NOTIFY, and
re-offers a job whose worker stopped heart-beating. Its tables are created by migration
0006. A job names a run; executing it claims the run by its revision, so a job delivered
twice still runs its run once. See docs/plugins.md for why pgqueuer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection

import asyncpg
import msgspec
from pgqueuer import AsyncpgPoolDriver, Job, Queries, QueueManager
from pgqueuer.domain.schema.declaration import target
from pgqueuer.domain.settings import db_settings
from sqlalchemy.engine import make_url

from runpoint.seams.runqueue import QueuedRun

_decode = msgspec.json.Decoder(QueuedRun).decode
log = logging.getLogger(__name__)


ENTRYPOINT = "runpoint.run "


def entrypoint(agent_id: str) -> str:
    """Jobs are queued per agent: a process takes only the runs of agents it serves."""
    return ENTRYPOINT + agent_id


class PgQueue:
    def __init__(self, url: str) -> None:
        self.dsn = make_url(url).set(drivername="postgresql").render_as_string(False)
        self._pool: asyncpg.Pool | None = None
        self._queries: Queries | None = None
        self._manager: QueueManager | None = None
        self._consuming: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[object]] = set()

    async def open(
        self, agent_ids: Collection[str], execute: Callable[[QueuedRun], Awaitable[None]]
    ) -> None:
        # two connections at least: pgqueuer keeps one to LISTEN on
        self._pool = await asyncpg.create_pool(self.dsn, min_size=2, max_size=4)
        self._queries = Queries(AsyncpgPoolDriver(self._pool))
        if not agent_ids:
            return
        manager = self._manager = QueueManager(self._queries)
        await manager.verify_structure()  # fail at start-up, not in the background

        async def take(job: Job) -> None:
            if manager.shutdown.is_set():  # closing: its run is left to the lease watch
                return
            task = asyncio.current_task()
            assert task is not None and job.payload is not None
            self._jobs.add(task)
            try:
                await execute(_decode(job.payload))
            finally:
                self._jobs.discard(task)

        for agent_id in agent_ids:
            manager.entrypoint(entrypoint(agent_id))(take)
        self._consuming = asyncio.create_task(self._consume(manager), name="run queue")

    async def _consume(self, manager: QueueManager) -> None:
        while not manager.shutdown.is_set():
            try:
                # one job at a time: a batch would go to whichever process asked first
                await manager.run(batch_size=1)
            except Exception:  # a lost database connection must not end the consumer
                log.exception("run queue failed; retrying")
                await asyncio.sleep(1)

    @property
    def running(self) -> bool:
        """Open, and (where it takes jobs) its consumer alive."""
        consumer = self._consuming
        return self._pool is not None and (consumer is None or not consumer.done())

    async def close(self) -> None:
        if self._manager is not None and self._consuming is not None:
            self._manager.shutdown.set()
            for task in list(self._jobs):  # their runs keep their leases: the lease watch has them
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._consuming
        if self._pool is not None:
            await self._pool.close()

    async def waiting(self) -> dict[str, int]:
        """The jobs queued and not yet taken, by agent."""
        assert self._queries is not None, "the queue is not open"
        waiting: dict[str, int] = {}
        for row in await self._queries.queue_size():
            if row.status == "queued" and row.entrypoint.startswith(ENTRYPOINT):
                agent_id = row.entrypoint.removeprefix(ENTRYPOINT)
                waiting[agent_id] = waiting.get(agent_id, 0) + row.count
        return waiting

    async def put(self, job: QueuedRun) -> None:
        assert self._queries is not None, "the queue is not open"
        await self._queries.enqueue(entrypoint(job.agent_id), msgspec.json.encode(job))


def is_queue_table(name: str | None) -> bool:
    """Whether a table is pgqueuer's (not described in schema.py)."""
    return name in {t.name for t in target(db_settings()).tables}
