"""What adapters call: runs, timelines, snapshots, continue and fork, sessions.

`Runpoint` wires the jobs together and delegates to them: `runpoint.runs.commands` (create,
continue, cancel, fork session), `runpoint.reads.queries` (reads), `runpoint.sessions.lifecycle` and
`runpoint.sessions.checkpoints` (sessions), `runpoint.runs.executor` (where runs run). Every
method validates its request completely before it starts anything, and raises the typed
errors of `runpoint.core.errors`.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Literal

from runpoint.core.types import Checkpoint, Decision, Message, Run, RunEvent, Session, new_id
from runpoint.durable.leases import Leases
from runpoint.durable.retention import Sweeper
from runpoint.reads import diffs
from runpoint.reads.continue_points import ContinueFrom
from runpoint.reads.diffs import Diff
from runpoint.reads.queries import Queries, RunDetail, Snapshot
from runpoint.runs.commands import Commands, CreateRun, ForkSession
from runpoint.runs.continuation import Branch, ContinueRun
from runpoint.runs.edits import EditRequest
from runpoint.runs.executor import Executor, RunHandle
from runpoint.runs.fan_out import FanOut
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost
from runpoint.seams.retention import Retention
from runpoint.seams.runqueue import Watched
from runpoint.seams.storage import Migrated, Storage
from runpoint.sessions.checkpoints import SessionCheckpoints
from runpoint.sessions.lifecycle import Sessions


class Runpoint:
    def __init__(
        self,
        agents: Iterable[Agent],
        *,
        database: str | None = None,
        storage: Storage | None = None,
        host: PluginHost | None = None,
        busy_session: Literal["conflict", "wait"] = "conflict",
        busy_timeout: float = 30.0,
        lease_seconds: float = 30.0,
        max_recoveries: int = 3,
        recover: bool = True,
        execute_queued: bool = True,
        retention: Retention | None = None,
        sweep_seconds: float = 60.0,
        sweep_batch: int = 200,
    ) -> None:
        """Serve `agents` from `database` (a URL; its plugin also gives the run queue, if
        it has one) or from `storage`.

        `busy_session` says what a new run in a session that has a run in flight
        does: fail with Conflict, or wait (up to `busy_timeout` seconds) for it.

        A run executing here holds a lease of `lease_seconds`, renewed while it goes;
        with `recover`, this process resumes runs whose process died (their lease ran
        out), each at most `max_recoveries` times (see runpoint.durable.leases).

        Where the database has a run queue, background runs go through it to any
        process; `execute_queued=False` makes this process only accept them.

        `retention` is what finished runs keep how long (each agent's over it): a sweep
        every `sweep_seconds`, of `sweep_batch` runs at most (see
        runpoint.durable.retention)."""
        self.host = host or PluginHost()
        agents = list(agents)
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
        self.executor = Executor(storage, self.host, self.leases, self.queries, queue)
        self.sweeper = Sweeper(
            storage,
            self.host,
            retention or Retention(),
            {a.id: a.retention for a in agents},
            batch=sweep_batch,
            every=sweep_seconds,
        )
        self.commands = Commands(
            storage,
            self.host,
            self.leases,
            self.queries,
            self.sessions,
            self.executor,
            busy_session=busy_session,
            busy_timeout=busy_timeout,
        )

    async def open(self) -> Runpoint:
        await self.storage.open()
        await self.executor.open(execute_queued=self._execute_queued, recover=self._recover)
        self.sweeper.start()
        return self

    async def close(self) -> None:
        await self.sweeper.stop()
        await self.executor.close()
        await self.storage.close()

    async def readiness(self) -> dict[str, str]:
        """Whether this process can serve: each check "ok", or what is wrong. The
        database answers a read; a backend with a schema has no migration pending; a run
        queue, where there is one, is running."""
        checks = {"database": "ok"}
        try:
            await self.storage.get_session("readiness-probe")
            if isinstance(self.storage, Migrated):
                pending = await self.storage.pending_migrations()
                checks["migrations"] = f"not applied: {', '.join(pending)}" if pending else "ok"
        except Exception as exc:  # a probe reports what it met rather than fail
            checks["database"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
        if (queue := self.executor.queue) is not None:
            running = not isinstance(queue, Watched) or queue.running
            checks["queue"] = "ok" if running else "not running"
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

    # -- runs ----------------------------------------------------------------------

    def agent(self, agent_id: str) -> Agent:
        return self.queries.agent(agent_id)

    async def create_run(
        self,
        agent_id: str,
        message: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        stream: bool = False,
        background: bool = False,
        idempotency_key: str | None = None,
    ) -> RunHandle:
        """Start a run. With `background` it is PENDING until its first step (to a client
        that will poll rather than wait); either way it goes on without the caller."""
        request = CreateRun(
            agent_id=agent_id,
            message=message,
            session_id=session_id,
            user_id=user_id,
            background=background,
        )
        return await self.commands.create_run(
            request, stream=stream, idempotency_key=idempotency_key
        )

    async def follow(
        self,
        run_id: str,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        after: int = 0,
    ) -> AsyncIterator[list[RunEvent]]:
        """The run's events whose seq is past `after`: the stored ones, then the live ones
        until it stops or pauses, whichever process executes it; in the batches they came
        in (see runpoint.reads.streams)."""
        run = await self.queries.run(run_id, session_id=session_id, agent_id=agent_id)
        return self.executor.streams.follow(run, after)

    async def get_run(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> RunDetail[Message]:
        return await self.queries.messages.get_run(run_id, session_id=session_id, agent_id=agent_id)

    async def list_runs(self, session_id: str) -> list[Run]:
        return await self.queries.list_runs(session_id)

    async def list_run_details(self, session_id: str) -> list[RunDetail[Message]]:
        return await self.queries.messages.list_run_details(session_id)

    async def timeline(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> tuple[Run, list[Checkpoint]]:
        return await self.queries.timeline(run_id, session_id=session_id, agent_id=agent_id)

    async def find_run(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> Run:
        """The run alone, refused as every read refuses it (another team's, or not under
        the session or agent named): `timeline` in two steps, for an adapter that may
        already have what the second would read."""
        return await self.queries.run(run_id, session_id=session_id, agent_id=agent_id)

    async def checkpoints(self, run: Run) -> list[Checkpoint]:
        return await self.queries.checkpoints(run)

    async def snapshot(
        self,
        run_id: str,
        message_index: int,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> Snapshot[Message]:
        return await self.queries.messages.snapshot(
            run_id, message_index, session_id=session_id, agent_id=agent_id
        )

    async def diff(
        self,
        run_id: str,
        *,
        message_index: int | None = None,
        other_run_id: str | None = None,
        other_message_index: int | None = None,
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> Diff:
        """From `run_id` at `message_index` to `other_run_id` (the same run if None) at
        `other_message_index`, each None for a run's end (see `runpoint.reads.diffs`)."""
        return await diffs.diff(
            self.storage,
            self.queries,
            run_id,
            message_index,
            other_run_id or run_id,
            other_message_index,
            session_id=session_id,
            agent_id=agent_id,
        )

    async def continue_run(
        self,
        run_id: str,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        continue_from: ContinueFrom = "end",
        input: str | None = None,
        fork: bool = False,
        regenerate: bool = False,
        replace_original: bool | None = None,
        tools: Mapping[str, Decision] | None = None,
        edits: Sequence[EditRequest] = (),
        model: str | None = None,
        stream: bool = False,
        background: bool = False,
        idempotency_key: str | None = None,
    ) -> RunHandle:
        """Resume a run in place, or start a new run from one of its boundaries (see
        `runpoint.runs.continuation`), with `edits` to the messages before it perhaps (a new
        run, see `runpoint.runs.edits`)."""
        request = ContinueRun(
            run_id=run_id,
            session_id=session_id,
            agent_id=agent_id,
            continue_from=continue_from,
            input=input,
            fork=fork,
            regenerate=regenerate,
            replace_original=replace_original,
            tools=dict(tools) if tools is not None else None,
            edits=list(edits),
            model=model,
            background=background,
        )
        return await self.commands.continue_run(
            request, stream=stream, idempotency_key=idempotency_key
        )

    async def fan_out(
        self,
        run_id: str,
        branches: Sequence[Branch],
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        continue_from: ContinueFrom = "end",
        background: bool = False,
        idempotency_key: str | None = None,
    ) -> list[RunHandle]:
        """Fork `run_id` at `continue_from` into one new run per branch (1 to 8), all or
        nothing, executed concurrently (see `runpoint.runs.fan_out`)."""
        request = FanOut(
            run_id=run_id,
            branches=list(branches),
            session_id=session_id,
            agent_id=agent_id,
            continue_from=continue_from,
            background=background,
        )
        return await self.commands.fan_out(request, idempotency_key=idempotency_key)

    async def cancel(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> Run:
        """Cancel a run. One executing (here or in another process) stops at its next
        boundary; one nobody executes (paused, or its process died) ends now."""
        return await self.commands.cancel(run_id, session_id=session_id, agent_id=agent_id)

    # -- sessions ------------------------------------------------------------------

    async def create_session(
        self,
        agent_id: str,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        session_name: str | None = None,
    ) -> Session:
        """A new session of `agent_id`, empty until a run names it; Conflict if
        `session_id` is taken (a new id when None)."""
        self.agent(agent_id)
        session = Session(
            session_id=session_id or new_id(),
            agent_id=agent_id,
            user_id=user_id,
            session_name=session_name,
        )
        return await self.sessions.create(session)

    async def get_session(self, session_id: str) -> Session:
        return await self.sessions.get(session_id)

    async def rename_session(self, session_id: str, session_name: str | None) -> Session:
        """Give the session a name (None: take its name away)."""
        return await self.sessions.rename(session_id, session_name)

    async def list_sessions(self, *, limit: int = 100, offset: int = 0) -> list[Session]:
        """The sessions of the current principal's team, newest first."""
        return await self.sessions.list_sessions(limit=limit, offset=offset)

    async def delete_session(self, session_id: str) -> None:
        await self.sessions.delete([session_id])

    async def delete_sessions(self, session_ids: Sequence[str]) -> None:
        """Delete these sessions with their runs, all or none (NotFound, Conflict)."""
        await self.sessions.delete(list(dict.fromkeys(session_ids)))

    async def fork_session(
        self,
        session_id: str,
        *,
        agent_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """A new session with the same history; its runs point at the source's rows."""
        request = ForkSession(session_id=session_id, agent_id=agent_id)
        return await self.commands.fork_session(request, idempotency_key=idempotency_key)
