"""What adapters call: runs, timelines, snapshots, continue and fork, sessions.

`Runpoint` owns the agents, the storage and the runs executing in this process. Every
method validates its request completely before it starts anything, and raises the typed
errors of `runpoint.errors`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import msgspec

from runpoint import idempotency, tenancy
from runpoint import transcript as tx
from runpoint.agent import Agent
from runpoint.errors import (
    Conflict,
    InvalidBoundary,
    InvalidRequest,
    NotContinuable,
    NotFound,
)
from runpoint.host import PluginHost
from runpoint.loop import RunTask, announce
from runpoint.model import Model
from runpoint.recovery import Leases
from runpoint.runqueue import QueuedRun
from runpoint.session_checkpoints import SessionCheckpoints, fork_runs, forked_session
from runpoint.storage import Storage
from runpoint.types import (
    Checkpoint,
    Decision,
    Message,
    Run,
    RunEvent,
    RunStatus,
    Segment,
    Session,
    ToolCall,
    ToolExecution,
    new_id,
    now,
)

DEFAULT_DATABASE = "sqlite+aiosqlite:///runpoint.db"
ContinueFrom = Literal["end", "last_user"] | int
# statuses of a run that "continue from end" picks up again in place
RESUMABLE = {RunStatus.PAUSED, RunStatus.ERROR, RunStatus.RUNNING}
IN_FLIGHT = {RunStatus.PENDING, RunStatus.RUNNING}
BUSY_POLL_SECONDS = 0.05


class RunDetail(msgspec.Struct):
    """A run with its transcript and tool executions."""

    run: Run
    messages: list[Message]
    tools: list[ToolExecution]


class Snapshot(msgspec.Struct):
    """A run as it was at a boundary. `message_index` is the boundary actually used:
    the requested one snapped down so no tool call is cut from its result."""

    requested_index: int
    message_index: int
    checkpoint: Checkpoint | None
    detail: RunDetail


class RunHandle:
    """A run that was started: its first state, its events (if streamed), its end."""

    def __init__(
        self,
        run: Run,
        stopped: Callable[[], Awaitable[Run]],
        events: asyncio.Queue[RunEvent | None] | None,
        *,
        replayed: bool = False,
    ) -> None:
        self.run = run
        self._stopped = stopped
        self._events = events
        # the answer to a retried request (same Idempotency-Key): the first request's run,
        # whose events went to the first request
        self.replayed = replayed

    async def events(self) -> AsyncIterator[RunEvent]:
        if self._events is None:
            raise RuntimeError("this run was started without streaming")
        while (event := await self._events.get()) is not None:
            yield event

    async def result(self) -> Run:
        return await self._stopped()


class Runpoint:
    def __init__(
        self,
        agents: Iterable[Agent],
        *,
        database: str = DEFAULT_DATABASE,
        storage: Storage | None = None,
        host: PluginHost | None = None,
        busy_session: Literal["conflict", "wait"] = "conflict",
        busy_timeout: float = 30.0,
        lease_seconds: float = 30.0,
        max_recoveries: int = 3,
        recover: bool = True,
        execute_queued: bool = True,
    ) -> None:
        """`busy_session` says what a new run in a session that has a run in flight
        does: fail with Conflict, or wait (up to `busy_timeout` seconds) for it.

        A run executing here holds a lease of `lease_seconds`, renewed while it goes;
        with `recover`, this process resumes runs whose process died (their lease ran
        out), each at most `max_recoveries` times (see runpoint.recovery).

        Where the database has a run queue (PostgreSQL), background runs go through it
        to any process; `execute_queued=False` makes this process only accept them."""
        self.host = host or PluginHost()
        self.agents = {agent.id: agent for agent in agents}
        self.storage = storage or self.host.storage(database)
        self.queue = self.host.queue(database) if storage is None else None
        self._execute_queued = execute_queued
        self.busy_session = busy_session
        self.busy_timeout = busy_timeout
        self.leases = Leases(
            self.storage, lease_seconds=lease_seconds, max_recoveries=max_recoveries
        )
        self.session_checkpoints = SessionCheckpoints(self.storage, self.host, self.leases)
        self._recover = recover
        self._active: dict[str, RunTask] = {}
        self._background: set[asyncio.Task[Any]] = set()
        for agent in self.agents.values():  # fail at start-up, not at the first run
            self.host.policy(agent)
            if isinstance(agent.model, str):
                self.host.model(agent.model)

    async def open(self) -> Runpoint:
        await self.storage.open()
        if self.queue is not None:
            await self.queue.open(list(self.agents) if self._execute_queued else [], self._take)
        if self._recover:
            watch = self.leases.watch(
                lambda: list(self._active), list(self.agents), self._recovered
            )
            self._keep(asyncio.create_task(watch, name="lease watch"))
        return self

    async def close(self) -> None:
        if self.queue is not None:  # first, so no job starts a run while runs are stopped
            await self.queue.close()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await self.storage.close()

    async def __aenter__(self) -> Runpoint:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- runs ----------------------------------------------------------------------

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

        def again() -> Awaitable[RunHandle]:  # this request, without its key
            return self.create_run(
                agent_id,
                message,
                session_id=session_id,
                user_id=user_id,
                stream=stream,
                background=background,
            )

        if idempotency_key is not None:
            request = {
                "operation": f"create_run {agent_id}",
                "message": message,
                "session_id": session_id,
                "user_id": user_id,
                "background": background,
            }
            return await self._once(idempotency_key, request, again)
        agent = self.agent(agent_id)
        if not message.strip():
            raise InvalidRequest("message must not be empty")
        session = await self.storage.get_session(session_id) if session_id else None
        new_session = session is None
        if session is not None:
            tenancy.check(session.team_id, "session", session.session_id)
            if session.agent_id != agent_id:
                raise InvalidRequest(f"session {session_id} belongs to agent {session.agent_id}")
            await self.session_checkpoints.settle_lock(session)
        else:
            session = Session(
                session_id=session_id or new_id(),
                agent_id=agent_id,
                team_id=tenancy.current().team,
                user_id=user_id,
            )
        run_id = new_id()
        incoming = [Message(role="user", content=message)]
        run = Run(
            run_id=run_id,
            session_id=session.session_id,
            agent_id=agent_id,
            team_id=session.team_id,
            status=RunStatus.PENDING if background else RunStatus.RUNNING,
            user_id=user_id or session.user_id,
            input=message,
            model=agent.model_name,
            policy=agent.checkpoint,
            segments=[Segment(run_id, 0)],
            message_count=len(incoming),
        )
        self._lease(run, background, stream)
        if new_session:  # the session and its first run (with its input) in one transaction
            try:
                await self.storage.create_sessions([session], [run], {run_id: incoming})
            except Conflict:  # a concurrent request created the session: join it
                return await again()
            return await self._begin(agent, run, incoming, stream, background)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.busy_timeout
        while True:
            try:
                run = await self.storage.start_in_session(run, incoming)
                break
            except Conflict:
                if self.busy_session != "wait" or loop.time() >= deadline:
                    raise
                await asyncio.sleep(BUSY_POLL_SECONDS)
        return await self._begin(agent, run, incoming, stream, background)

    async def get_run(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> RunDetail:
        run = await self._run(run_id, session_id, agent_id)
        messages = await self.storage.read_messages(run.segments, run.message_count)
        return self._detail(run, messages)

    async def list_runs(self, session_id: str) -> list[Run]:
        await self.get_session(session_id)
        return await self.storage.list_runs(session_id)

    async def timeline(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> tuple[Run, list[Checkpoint]]:
        run = await self._run(run_id, session_id, agent_id)
        return run, await self.storage.list_checkpoints(run.segments)

    async def snapshot(
        self,
        run_id: str,
        message_index: int,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> Snapshot:
        run = await self._run(run_id, session_id, agent_id)
        if not 0 <= message_index <= run.message_count:
            raise InvalidBoundary(
                f"message_index {message_index} is outside this run's boundaries "
                f"0..{run.message_count}"
            )
        messages = await self.storage.read_messages(run.segments, message_index)
        index = tx.safe_boundary(messages, message_index)
        messages = messages[:index]
        earlier = await self.storage.list_checkpoints(run.segments, upto=index)
        checkpoint = earlier[-1] if earlier and earlier[-1].message_index == index else None
        if checkpoint is not None:
            status = checkpoint.status
        else:
            status = run.status if index == run.message_count else RunStatus.RUNNING
        own = messages[run.own_start :]
        as_of = msgspec.structs.replace(
            run,
            status=status,
            content=tx.final_content(own),
            usage=tx.total_usage(own),
            message_count=index,
            error=run.error if index == run.message_count else None,
            last_checkpoint_at_message_index=earlier[-1].message_index if earlier else None,
        )
        return Snapshot(message_index, index, checkpoint, self._detail(as_of, messages))

    async def continue_run(
        self,
        run_id: str,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
        continue_from: ContinueFrom | str = "end",
        input: str | None = None,
        fork: bool = False,
        regenerate: bool = False,
        replace_original: bool | None = None,
        tools: Mapping[str, Decision] | None = None,
        model: str | None = None,
        stream: bool = False,
        background: bool = False,
        idempotency_key: str | None = None,
    ) -> RunHandle:
        """Resume a run in place, or start a new run from one of its boundaries.

        Only "continue from end" of a PAUSED, ERROR or interrupted run resumes the same
        run; everything else creates a new run with lineage, so history is never
        rewritten. `regenerate` re-answers the run's final answer in a new run (tool work
        is kept) and, unless `replace_original` is False, marks the source REGENERATED.
        `tools` maps the tool_call_id of a paused call to a person's decision: run it
        (True), do not (False), or, for a call in doubt, the result it had (a string).
        """
        if idempotency_key is not None:
            arguments = {
                "session_id": session_id,
                "continue_from": continue_from,
                "input": input,
                "fork": fork,
                "regenerate": regenerate,
                "replace_original": replace_original,
                "tools": tools,
                "model": model,
                "background": background,
            }
            return await self._once(
                idempotency_key,
                {"operation": f"continue_run {agent_id} {run_id}", **arguments},
                lambda: self.continue_run(
                    run_id,
                    agent_id=agent_id,
                    stream=stream,
                    **arguments,  # type: ignore[arg-type]
                ),
            )
        source = await self._run(run_id, session_id, agent_id)
        session = await self.storage.get_session(source.session_id)
        if session is not None and session.locked is not None:
            await self.session_checkpoints.settle_lock(session)
            source = await self._run(run_id, session_id, agent_id)  # rolled back, perhaps
        agent = self.agent(source.agent_id)
        if source.hidden:
            raise NotContinuable(
                f"run {run_id} was rolled back out of its session; it is history only"
            )
        if input is not None and not input.strip():
            raise InvalidRequest("input must not be empty")
        if replace_original is not None and not regenerate:
            raise InvalidRequest("replace_original applies only with regenerate")
        if regenerate and (input is not None or fork or continue_from != "end"):
            raise InvalidRequest(
                "regenerate chooses its own boundary and always makes a new run; "
                "it takes no input, fork or continue_from"
            )
        if model is not None:
            self.host.model(model)  # unknown providers fail here, before anything starts
        count = source.message_count
        if regenerate:
            index = await self._before_final_answer(source)
            if index == count:
                raise NotContinuable(f"run {run_id} has no final answer to regenerate")
        else:
            index = await self._resolve_boundary(source, continue_from)
        # in place, the loop picks up whatever the tail holds (a paused batch, say);
        # a new run starts from a whole boundary
        in_place = index == count and not fork and not regenerate and source.status in RESUMABLE
        tail_start, tail = await self._last_turn(source, index)
        index = tail_start + tx.safe_boundary(tail, len(tail))
        if tools and not (in_place and source.status is RunStatus.PAUSED):
            raise InvalidRequest("tool decisions apply only to continuing a paused run from end")
        if in_place:
            pending = tx.unanswered_calls(tail)
            return await self._resume(
                agent, source, pending, input, tools or {}, model, stream, background
            )
        if index == count and not fork and not regenerate and input is None:
            raise NotContinuable(
                f"run {run_id} is {source.status}; to continue it from its end give an input, "
                "or set fork or regenerate"
            )
        if regenerate and replace_original is not False:
            if source.status in IN_FLIGHT:
                raise Conflict(f"run {run_id} is in flight; it cannot be replaced yet")
            source.status = RunStatus.REGENERATED
            await self.storage.save(source, [], None)
        new_run_id = new_id()
        new = [Message(role="user", content=input)] if input is not None else []
        run = Run(
            run_id=new_run_id,
            session_id=source.session_id,
            agent_id=source.agent_id,
            team_id=source.team_id,
            status=RunStatus.PENDING if background else RunStatus.RUNNING,
            user_id=source.user_id,
            input=input if input is not None else source.input,
            model=model or agent.model_name,
            policy=agent.checkpoint,
            segments=[*tx.cut(source.segments, index), Segment(new_run_id, index)],
            message_count=index + len(new),
            previous_run_id=source.previous_run_id,
            forked_from_run_id=source.run_id,
            forked_from_message_index=index,
            regenerated_from=source.run_id if regenerate else None,
        )
        self._lease(run, background, stream)
        await self.storage.create_runs([run], {new_run_id: new})
        return await self._begin(agent, run, new, stream, background, model=model)

    async def cancel(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> Run:
        """Cancel a run. One executing (here or in another process) stops at its next
        boundary; one nobody executes (paused, or its process died) ends now."""
        run = await self._run(run_id, session_id, agent_id)
        if (task := self._active.get(run_id)) is not None:
            task.cancel_requested.set()
            return run
        if self.leases.is_held_elsewhere(run) and await self.storage.request_cancel(run_id):
            run.cancel_requested = True
            return run
        if run.status not in (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED):
            raise NotContinuable(f"run {run_id} already ended: {run.status}")
        run.status = RunStatus.CANCELLED
        run.updated_at = now()
        self.leases.stamp(run)
        try:
            await self.storage.save(run, [], None)
        except Conflict:  # a process took it off the queue meanwhile: ask that one to stop
            return await self.cancel(run_id, session_id=session_id, agent_id=agent_id)
        return run

    # -- sessions ------------------------------------------------------------------

    async def get_session(self, session_id: str) -> Session:
        session = await self.storage.get_session(session_id)
        if session is None:
            raise NotFound(f"session {session_id} not found")
        tenancy.check(session.team_id, "session", session_id)
        return session

    async def list_sessions(self, *, limit: int = 100, offset: int = 0) -> list[Session]:
        """The sessions of the current principal's team, newest first."""
        team = tenancy.current().team
        return await self.storage.list_sessions(team_id=team, limit=limit, offset=offset)

    async def delete_session(self, session_id: str) -> None:
        await self.get_session(session_id)
        if not await self.storage.delete_session(session_id):
            raise NotFound(f"session {session_id} not found")

    async def fork_session(
        self,
        session_id: str,
        *,
        agent_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Session:
        """A new session with the same history; its runs point at the source's rows."""
        if idempotency_key is not None:
            return await idempotency.once(
                self.storage,
                idempotency_key,
                {"operation": f"fork_session {agent_id} {session_id}"},
                lambda: self.fork_session(session_id, agent_id=agent_id),
                lambda session: session.session_id,
                self.get_session,
                wait_seconds=self.busy_timeout,
            )
        source = await self.get_session(session_id)
        if agent_id is not None and source.agent_id != agent_id:
            raise NotFound(f"session {session_id} not found for agent {agent_id}")
        source_runs = await self.storage.list_runs(session_id)
        if busy := [r.run_id for r in source_runs if r.status in IN_FLIGHT]:
            raise Conflict(f"session {session_id} has runs in flight: {', '.join(busy)}")
        session = forked_session(source, source.event_seq)
        await self.storage.create_sessions([session], fork_runs(source_runs, session.session_id))
        return session

    # -- internals -----------------------------------------------------------------

    def agent(self, agent_id: str) -> Agent:
        try:
            return self.agents[agent_id]
        except KeyError:
            raise NotFound(f"agent {agent_id} not found") from None

    async def _run(self, run_id: str, session_id: str | None, agent_id: str | None) -> Run:
        if agent_id is not None:
            self.agent(agent_id)
        run = await self.storage.get_run(run_id)
        if (
            run is None
            or (session_id is not None and run.session_id != session_id)
            or (agent_id is not None and run.agent_id != agent_id)
        ):
            raise NotFound(f"run {run_id} not found")
        tenancy.check(run.team_id, "run", run_id)
        return run

    def _detail(self, run: Run, messages: list[Message]) -> RunDetail:
        agent = self.agents.get(run.agent_id)
        confirm = {n: t.requires_confirmation for n, t in agent.tool_map.items()} if agent else {}
        return RunDetail(run, messages, tx.tool_executions(messages, confirm, run.in_doubt))

    async def _resolve_boundary(self, run: Run, continue_from: ContinueFrom | str) -> int:
        count = run.message_count
        if continue_from == "end":
            return count
        if continue_from == "last_user":
            index = await self.storage.last_index(run.segments, count, "user")
            if index is None:
                raise InvalidBoundary("the run has no user message to continue from")
            return index + 1
        if isinstance(continue_from, str):
            try:
                continue_from = int(continue_from.strip())
            except ValueError:
                raise InvalidBoundary(
                    f"continue_from must be 'end', 'last_user' or a message index, "
                    f"not {continue_from!r}"
                ) from None
        if not 0 <= continue_from <= count:
            raise InvalidBoundary(
                f"continue_from {continue_from} is outside this run's boundaries 0..{count}"
            )
        return continue_from

    async def _last_turn(self, run: Run, index: int) -> tuple[int, list[Message]]:
        """The messages from the last assistant turn before `index` up to it: all that
        decides whether `index` is a whole boundary, read without the rest."""
        start = await self.storage.last_index(run.segments, index, "assistant") or 0
        return start, await self.storage.read_messages(run.segments, index, start=start)

    async def _before_final_answer(self, run: Run) -> int:
        index = run.message_count
        while index > 0:
            [last] = await self.storage.read_messages(run.segments, index, start=index - 1)
            if last.role != "assistant" or last.tool_calls:
                break
            index -= 1
        return index

    def _refuse_active(self, run: Run) -> None:
        # a task that has paused or finished may still be winding down: no longer a writer
        task = self._active.get(run.run_id)
        if task is not None and task.run.status in IN_FLIGHT:
            raise Conflict(f"run {run.run_id} is in flight")

    async def _resume(
        self,
        agent: Agent,
        run: Run,
        pending: list[ToolCall],
        input: str | None,
        decisions: Mapping[str, Decision],
        model: str | None,
        stream: bool,
        background: bool,
    ) -> RunHandle:
        self._refuse_active(run)
        if unknown := set(decisions) - {c.id for c in pending}:
            raise InvalidRequest(f"no paused tool call has the id(s) {sorted(unknown)}")
        if pending and input is not None:
            raise InvalidRequest(
                "the run is waiting for tool decisions; send `tools`, not a new input"
            )
        new = [Message(role="user", content=input)] if input is not None else []
        if model is not None:
            run.model = model
        if self.leases.is_held_elsewhere(run):
            raise Conflict(f"run {run.run_id} is executing in another process")
        # Claim the run, with its new input or the person's decisions (added to those of
        # an earlier continue the batch still waits on): whoever executes it reads them
        # from the run. A concurrent continue of it (here or in another process) read the
        # same revision, and its claim now fails with Conflict.
        run.status = RunStatus.PENDING if background else RunStatus.RUNNING
        run.error = None
        run.message_count += len(new)
        run.decisions = {**run.decisions, **decisions}
        self._lease(run, background, stream)
        await self.storage.save(run, new, None)
        return await self._begin(agent, run, new, stream, background, resumed=True, model=model)

    async def _start(
        self,
        agent: Agent,
        run: Run,
        new_messages: Sequence[Message],
        stream: bool,
        *,
        resumed: bool = False,
        model: str | None = None,
    ) -> RunHandle:
        queue: asyncio.Queue[RunEvent | None] | None = asyncio.Queue() if stream else None

        def emit(event: RunEvent) -> None:
            if queue is not None:
                queue.put_nowait(event)

        task = RunTask(
            agent=agent,
            model=self.host.model(model) if model else self._model(agent),
            policy_name=agent.checkpoint,
            policy=self.host.policy(agent),
            storage=self.storage,
            leases=self.leases,
            hook=self.host.hook,
            run=run,
            emit=emit,
            incoming=new_messages,
            resumed=resumed or run.forked_from_run_id is not None,
        )
        self._active[run.run_id] = task

        async def execute() -> Run:
            try:
                return await task.execute()
            finally:
                if self._active.get(run.run_id) is task:  # not a later execution's
                    del self._active[run.run_id]
                if queue is not None:
                    queue.put_nowait(None)

        running = asyncio.create_task(execute(), name=f"run {run.run_id}")
        self._keep(running)
        return RunHandle(msgspec.structs.replace(run), lambda: asyncio.shield(running), queue)

    def _queued(self, background: bool, stream: bool) -> bool:
        """Whether a new execution goes through the run queue rather than start here:
        a background run (one nobody streams) on a database with a queue."""
        return background and not stream and self.queue is not None

    def _lease(self, run: Run, background: bool, stream: bool) -> None:
        """Hold a run about to execute here; leave one for the queue to nobody."""
        if self._queued(background, stream):
            self.leases.offer(run)
        else:
            self.leases.stamp(run)

    async def _begin(
        self,
        agent: Agent,
        run: Run,
        incoming: Sequence[Message],
        stream: bool,
        background: bool,
        *,
        resumed: bool = False,
        model: str | None = None,
    ) -> RunHandle:
        """Execute an accepted run here, or hand it to the run queue."""
        if self._queued(background, stream):
            return await self._enqueue(run, incoming)
        return await self._start(agent, run, incoming, stream, resumed=resumed, model=model)

    async def _enqueue(self, run: Run, incoming: Sequence[Message]) -> RunHandle:
        """Put an accepted PENDING run on the queue. Its input and tool decisions were
        written with it, so whoever takes it (the job's process, or the lease watch if no
        process claims it in time) needs nothing but the run."""
        assert self.queue is not None
        announce(self.host.hook, run, incoming)
        await self.queue.put(QueuedRun(run.run_id, run.agent_id))
        return self._follow(run)

    async def _take(self, job: QueuedRun) -> None:
        """Execute a run from the queue if it still waits: claim it (one process wins, by
        the run's revision) and run it here until it stops."""
        run = await self.storage.get_run(job.run_id)
        if run is None or run.status is not RunStatus.PENDING:
            return  # cancelled, or taken by the lease watch
        run.status = RunStatus.RUNNING
        self.leases.stamp(run)
        try:
            await self.storage.save(run, [], None)
        except Conflict:
            return  # cancelled or claimed meanwhile
        agent = self.agent(run.agent_id)
        handle = await self._start(agent, run, [], False, model=_switched_model(agent, run))
        await handle.result()

    async def _once(
        self, key: str, request: Mapping[str, Any], start: Callable[[], Awaitable[RunHandle]]
    ) -> RunHandle:
        return await idempotency.once(
            self.storage,
            key,
            request,
            start,
            lambda handle: handle.run.run_id,
            self._replay,
            wait_seconds=self.busy_timeout,
        )

    async def _replay(self, run_id: str) -> RunHandle:
        """A handle on a run another request started."""
        return self._follow(await self._run(run_id, None, None), replayed=True)

    def _follow(self, run: Run, *, replayed: bool = False) -> RunHandle:
        """A handle on a run executing elsewhere: its end is polled for when asked."""

        async def stopped() -> Run:
            current = run
            while current.status in IN_FLIGHT:
                await asyncio.sleep(BUSY_POLL_SECONDS)
                current = await self._run(run.run_id, None, None)
            return current

        return RunHandle(msgspec.structs.replace(run), stopped, None, replayed=replayed)

    def _keep(self, task: asyncio.Task[Any]) -> None:
        """Hold a background task until it ends (asyncio keeps only weak references)."""
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _recovered(self, run: Run) -> RunHandle:
        """Resume a run claimed from a process that died."""
        agent = self.agent(run.agent_id)
        return await self._start(
            agent, run, [], False, resumed=True, model=_switched_model(agent, run)
        )

    def _model(self, agent: Agent) -> Model:
        return self.host.model(agent.model) if isinstance(agent.model, str) else agent.model


def _switched_model(agent: Agent, run: Run) -> str | None:
    """The model a run was switched to (by a continue with `model`), if not its agent's."""
    return run.model if run.model != agent.model_name else None
