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
from datetime import timedelta

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


# how long the consumer waits for a NOTIFY before it looks for jobs anyway (pgqueuer's
# default is 30 s): a lost listening connection, or a database back from a restart, is
# noticed within about this long
POLL = timedelta(seconds=5)
LISTENER_TIMEOUT = timedelta(seconds=2)  # for readiness: a NOTIFY heard back within


class _Driver(AsyncpgPoolDriver):
    """pgqueuer's pool driver, which on leaving resets its listening connection: one the
    server cut is already back in the pool, and asyncpg refuses (InterfaceError). Then it
    is let go of, so that the next start listens on a new connection (else every start
    fails on it again, and the queue never takes a job)."""

    async def __aexit__(self, *exc: object) -> None:
        try:
            await super().__aexit__(*exc)
        except (asyncpg.InterfaceError, asyncpg.PostgresError, OSError):
            listener, self._listener_connection = self._listener_connection, None
            if listener is not None:
                with contextlib.suppress(asyncpg.InterfaceError, asyncpg.PostgresError, OSError):
                    await self._pool.release(listener)


class PgQueue:
    def __init__(self, url: str) -> None:
        self.dsn = make_url(url).set(drivername="postgresql").render_as_string(False)
        self._pool: asyncpg.Pool | None = None
        self._queries: Queries | None = None
        self._manager: QueueManager | None = None
        self._consuming: asyncio.Task[None] | None = None
        self._closing = False
        self._jobs: set[asyncio.Task[object]] = set()

    async def open(
        self, agent_ids: Collection[str], execute: Callable[[QueuedRun], Awaitable[None]]
    ) -> None:
        # two connections at least: pgqueuer keeps one to LISTEN on
        self._pool = await asyncpg.create_pool(self.dsn, min_size=2, max_size=4, timeout=5)
        self._queries = Queries(_Driver(self._pool))
        if not agent_ids:
            return
        manager = self._manager = QueueManager(self._queries)
        await manager.verify_structure()  # fail at start-up, not in the background

        async def take(job: Job) -> None:
            if self._closing:  # its run is left to the lease watch
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
        """Take jobs until closed; started again after each failure (a lost database
        connection, or a listening connection that stopped hearing: pgqueuer's own
        probe ends the run), on new connections."""
        while not self._closing:
            try:
                # one job at a time: a batch would go to whichever process asked first
                await manager.run(
                    batch_size=1, dequeue_timeout=POLL, shutdown_on_listener_failure=True
                )
            except Exception as exc:  # a lost database connection must not end the consumer
                log.warning(
                    "run queue stopped (%s: %s); starting it again", type(exc).__name__, exc
                )
                await asyncio.sleep(1)
            if not self._closing:
                manager.shutdown.clear()

    async def health(self) -> str:
        """ "ok" once a NOTIFY sent now is heard by the consumer's listening connection
        (where this process takes jobs; else once its pool answers)."""
        if self._pool is None:
            return "not open"
        try:
            if self._manager is None:
                await self._pool.fetchval("SELECT 1")
            elif self._consuming is None or self._consuming.done():
                return "not running"
            else:
                await self._manager.listener_healthy(LISTENER_TIMEOUT)
        except Exception as exc:
            return f"not consuming: {type(exc).__name__}: {exc}".splitlines()[0][:200]
        return "ok"

    async def close(self) -> None:
        self._closing = True
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
