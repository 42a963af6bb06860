"""What adapters call: runs, timelines, snapshots, continue and fork, sessions.

`Runpoint` wires the jobs together and delegates to them: `runpoint.runs.commands` (create,
continue, fan out, cancel, fork session), `runpoint.reads.queries` (reads),
`runpoint.sessions.lifecycle` and `runpoint.sessions.checkpoints` (sessions),
`runpoint.runs.executor` (where runs run); its runs half is `runpoint.facade.runs`, its
sessions half `runpoint.facade.sessions`. A command takes its request struct (exported here)
as the job does. Every method validates its request completely before it starts anything,
and raises the typed errors of `runpoint.core.errors`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from runpoint.core.errors import ConfigurationError
from runpoint.core.sealing import Codec
from runpoint.durable import LEASE_SECONDS, RETAIN_KEYS, SWEEP_BATCH, SWEEP_SECONDS
from runpoint.durable.leases import Leases
from runpoint.durable.outages import Outages
from runpoint.durable.retention import Sweeper
from runpoint.durable.schedules import SCHEDULE_SECONDS, Scheduler
from runpoint.facade.runs import RunsFacade
from runpoint.facade.sessions import SessionsFacade
from runpoint.reads.queries import Queries
from runpoint.runs.approvals import Approvals
from runpoint.runs.commands import Commands, CreateRun, ForkSession
from runpoint.runs.context import RunContext
from runpoint.runs.continuation import Branch, ContinueRun
from runpoint.runs.edits import EditRequest
from runpoint.runs.executor import Executor, RunHandle
from runpoint.runs.fan_out import FanOut
from runpoint.runs.jobs import Jobs
from runpoint.runs.schedules import Schedules
from runpoint.seams.agent import Agent
from runpoint.seams.crew import check_crews
from runpoint.seams.host import PluginHost
from runpoint.seams.model import Closable
from runpoint.seams.retention import Retention
from runpoint.seams.runqueue import Watched
from runpoint.seams.storage import Diagnosed, Encrypted, Migrated, Storage
from runpoint.sessions.checkpoints import SessionCheckpoints
from runpoint.sessions.lifecycle import Sessions

if TYPE_CHECKING:
    from runpoint.core.keyring import Keyring

__all__ = [
    "Branch",
    "ContinueRun",
    "CreateRun",
    "EditRequest",
    "FanOut",
    "ForkSession",
    "RunHandle",
    "Runpoint",
]


class Runpoint(RunsFacade, SessionsFacade):
    def __init__(
        self,
        agents: Iterable[Agent],
        *,
        database: str | None = None,
        storage: Storage | None = None,
        host: PluginHost | None = None,
        busy_session: Literal["conflict", "wait"] = "conflict",
        busy_timeout: float = 30.0,
        lease_seconds: float = LEASE_SECONDS,
        max_recoveries: int = 3,
        recover: bool = True,
        execute_queued: bool = True,
        retention: Retention | None = None,
        sweep_seconds: float = SWEEP_SECONDS,
        sweep_batch: int = SWEEP_BATCH,
        retain_keys: float = RETAIN_KEYS,
        keyring: Keyring | None = None,
        schedule: bool = True,
        schedule_seconds: float = SCHEDULE_SECONDS,
    ) -> None:
        """Serve `agents` from `database` (a SQLite file's path, `sqlite:///PATH`,
        `postgresql://...` or `memory:`, read by `runpoint.seams.host.database_url`; its
        plugin also gives the run queue, if it has one) or from `storage`.

        `busy_session` says what a new run in a session that has a run in flight
        does: fail with Conflict, or wait (up to `busy_timeout` seconds) for it.

        A run executing here holds a lease of `lease_seconds`, renewed while it goes;
        with `recover`, this process resumes runs whose process died (their lease ran
        out), each at most `max_recoveries` times (see runpoint.durable.leases).

        Where the database has a run queue, background runs go through it to any
        process; `execute_queued=False` makes this process only accept them.

        `retention` is what finished runs keep how long (each agent's over it): a sweep
        every `sweep_seconds`, of `sweep_batch` runs at most, which also removes answered
        Idempotency-Keys `retain_keys` seconds old (see runpoint.durable.retention).

        With a `keyring`, what users, tools and models wrote is stored encrypted (see
        `runpoint.seams.storage.Encrypted`); a storage that cannot is refused.

        With `schedule`, this process fires the schedules' due ticks (a pass every
        `schedule_seconds`) and settles their runs, as every other such process does:
        each tick fires once (see runpoint.durable.schedules)."""
        self.host = host or PluginHost()
        agents = list(agents)
        check_crews(agents)
        for agent in agents:  # fail at start-up, not at the first run
            self.host.policy(agent)
            if isinstance(agent.model, str):
                self.host.model(agent.model)
        if storage is None:
            if database is None:
                raise ValueError("Runpoint needs a database URL or a storage")
            storage = self.host.storage(database)
            queue = self.host.queue(database)
        else:
            queue = None
        if keyring is not None:
            if not isinstance(storage, Encrypted):
                raise ConfigurationError(
                    f"{type(storage).__name__} cannot encrypt what it stores: a keyring "
                    "needs a storage that can (SQLite, PostgreSQL, memory)"
                )
            storage.encrypt_with(Codec(keyring))
        self.storage = storage
        self._secrets: dict[str, bytes] = {}
        self._recover = recover
        self._execute_queued = execute_queued
        self.leases = Leases(storage, lease_seconds=lease_seconds, max_recoveries=max_recoveries)
        self.sessions = Sessions(storage, self.host, self.leases)
        self.session_checkpoints = SessionCheckpoints(
            storage, self.host, self.leases, self.sessions
        )
        self.queries = Queries(agents, storage, self.sessions)
        self.agents = self.queries.agents
        # get_run, snapshot and list_run_details with views for messages: for adapters
        # that encode what they read (see MessageView)
        self.views = self.queries.views
        self.outages = Outages(storage)
        context = RunContext(
            storage, self.host, self.leases, self.queries, self.sessions, self.outages
        )
        self.executor = Executor(context, queue)
        self.commands = Commands(
            context, self.executor, busy_session=busy_session, busy_timeout=busy_timeout
        )
        self.approvals = Approvals(storage, self.agents, self.commands)
        self.jobs = Jobs(storage, self.commands)
        self.sweeper = Sweeper(
            storage,
            self.host,
            retention or Retention(),
            {a.id: a.retention for a in agents},
            batch=sweep_batch,
            every=sweep_seconds,
            keys=retain_keys,
        )
        self.schedules = Schedules(storage, self.host, self.commands, self.agents)
        self.scheduler = Scheduler(
            storage,
            self.host,
            self.schedules.fire,
            self.schedules.settle,
            every=schedule_seconds,
            hold=lease_seconds,
        )
        self._schedule = schedule

    async def open(self) -> Runpoint:
        await self.storage.open()
        await self.executor.open(
            execute_queued=self._execute_queued,
            recover=self._recover,
            each_beat=self.approvals.beat,
        )
        self.sweeper.start()
        if self._schedule:
            self.scheduler.start()
        return self

    async def close(self) -> None:
        await self.scheduler.stop()
        await self.sweeper.stop()
        await self.executor.close()
        await self.storage.close()
        given = [a.model for a in self.agents.values() if not isinstance(a.model, str)]
        for model in {id(m): m for m in [*given, *self.host.made_models()]}.values():
            if isinstance(model, Closable):
                await model.aclose()

    async def readiness(self) -> dict[str, str]:
        """Whether this process can serve: each check "ok", or what is wrong. The
        database answers a read (and a write, after writes failed for lack of space); a
        backend with a schema has no migration pending; a run queue, where there is one,
        takes jobs."""
        checks = {"database": "ok"}
        try:
            if isinstance(self.storage, Diagnosed):
                await self.storage.probe()
            else:
                await self.storage.get_session("readiness-probe")
            if isinstance(self.storage, Migrated):
                pending = await self.storage.pending_migrations()
                checks["migrations"] = f"not applied: {', '.join(pending)}" if pending else "ok"
        except Exception as exc:  # a probe reports what it met rather than fail
            said = self.outages.of(exc, counted=False) or f"{type(exc).__name__}: {exc}"
            checks["database"] = str(said).splitlines()[0]
        if (queue := self.executor.queue) is not None:
            checks["queue"] = await queue.health() if isinstance(queue, Watched) else "ok"
        return checks

    def executing(self) -> Counter[str]:
        """How many runs this process executes now, by agent."""
        return self.executor.executing()

    async def queued(self) -> dict[str, int] | None:
        """How many runs wait in the run queue, by agent (None without a queue)."""
        return await self.executor.queued()

    async def __aenter__(self) -> Runpoint:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def secret(self, name: str) -> bytes:
        """A random 64-byte secret of the database, `name`'s: the same in every process
        that opens it and after every restart (an adapter's key for what it hands out)."""
        if name not in self._secrets:
            self._secrets[name] = await self.storage.secret(name, os.urandom(64))
        return self._secrets[name]
