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
from pgqueuer.ports.driver import NotifyCallback
from sqlalchemy.engine import make_url

from runpoint.plugins.sql.outages import statement_timeout
from runpoint.seams.runqueue import QueuedRun

_decode = msgspec.json.Decoder(QueuedRun).decode
log = logging.getLogger(__name__)


ENTRYPOINT = "runpoint.run "


def entrypoint(agent_id: str) -> str:
    """Jobs are queued per agent: a process takes only the runs of agents it serves."""
    return ENTRYPOINT + agent_id


# how long the consumer waits for a NOTIFY before it looks for jobs anyway (pgqueuer's
# default is 30 s): while its listening connection is being replaced (the database
# restarted, say), jobs are still taken this often
POLL = timedelta(seconds=2)
# a job picked whose process stopped heart-beating (died, or lost its connection to the
# database between taking the job and starting its run) is offered again after this
STALE = timedelta(seconds=5)
LISTENER_TIMEOUT = timedelta(seconds=2)  # for readiness: a NOTIFY heard back within
RETRY_SECONDS = 1.0


class _Driver(AsyncpgPoolDriver):
    """pgqueuer's pool driver, whose LISTEN outlives its connection: pgqueuer keeps one
    listening connection for as long as it runs, and one the server cut (a restart) would
    never hear a NOTIFY again (asyncpg has already taken it back: pgqueuer's reset of it
    on leaving fails too, and the next start would fail on it for ever). When it closes,
    the channels are listened to again on a new connection, as soon as there is one."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self._channels: dict[str, NotifyCallback] = {}
        self._listening_again: asyncio.Task[None] | None = None
        self.listening = asyncio.Event()  # set once a channel is listened to

    async def add_listener(self, channel: str, callback: NotifyCallback) -> None:
        await super().add_listener(channel, callback)
        self._channels[channel] = callback
        assert self._listener_connection is not None
        self._listener_connection.add_termination_listener(self._lost)
        self.listening.set()

    def _lost(self, connection: object) -> None:
        self._listener_connection = None  # asyncpg took it back to the pool
        if not self._shutdown.is_set() and self._channels:
            self._listening_again = asyncio.create_task(self._listen_again())

    async def _listen_again(self) -> None:
        channels, self._channels = self._channels, {}
        while not self._shutdown.is_set():
            try:
                for channel, callback in channels.items():
                    await self.add_listener(channel, callback)
                return
            except (asyncpg.InterfaceError, asyncpg.PostgresError, OSError, TimeoutError):
                await asyncio.sleep(RETRY_SECONDS)

    async def __aexit__(self, *exc: object) -> None:
        self._channels = {}
        if self._listening_again is not None:
            self._listening_again.cancel()
        try:
            await super().__aexit__(*exc)
        except (asyncpg.InterfaceError, asyncpg.PostgresError, OSError):
            self._listener_connection = None  # lost: the next start listens anew


class PgQueue:
    def __init__(self, url: str) -> None:
        bare, self.command_timeout = statement_timeout(make_url(url))
        self.dsn = bare.set(drivername="postgresql").render_as_string(False)
        self._pool: asyncpg.Pool | None = None
        self._queries: Queries | None = None
        self._manager: QueueManager | None = None
        self._consuming: asyncio.Task[None] | None = None
        self._jobs: set[asyncio.Task[object]] = set()

    async def open(
        self, agent_ids: Collection[str], execute: Callable[[QueuedRun], Awaitable[None]]
    ) -> None:
        # two connections at least: pgqueuer keeps one to LISTEN on. None kept open idle:
        # the pool would retry them (logging each try) while the database is down
        self._pool = await asyncpg.create_pool(
            self.dsn, min_size=0, max_size=4, timeout=5, command_timeout=self.command_timeout
        )
        driver = _Driver(self._pool)
        self._queries = Queries(driver)
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
        # ready once it hears of new jobs (if it cannot, readiness says so)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(driver.listening.wait(), LISTENER_TIMEOUT.total_seconds())

    async def _consume(self, manager: QueueManager) -> None:
        """Take jobs until closed; started again after a failure (a lost database
        connection)."""
        while not manager.shutdown.is_set():
            try:
                # one job at a time: a batch would go to whichever process asked first
                await manager.run(batch_size=1, dequeue_timeout=POLL, heartbeat_timeout=STALE)
            except Exception as exc:  # a lost database connection must not end the consumer
                log.warning(
                    "run queue stopped (%s: %s); starting it again", type(exc).__name__, exc
                )
                await asyncio.sleep(RETRY_SECONDS)

    async def health(self) -> str:
        """Whether it takes jobs: "ok" once a NOTIFY sent now is heard back on the
        consumer's listening connection (where this process takes jobs; else once its pool
        answers), or what keeps it from it."""
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
            said = str(exc).splitlines()[0][:200] if str(exc) else "no NOTIFY heard back"
            return f"not consuming: {type(exc).__name__}: {said}"
        return "ok"

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
