"""Where runs run: executions in this process and their handles, the run queue's intake,
and the lease watch that resumes runs whose process died (`runpoint.durable.leases`).

A run accepted by a command is begun here: executed in this process, or, in the
background on a database with a run queue, put on the queue for any process to take.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import msgspec

from runpoint.core.errors import Conflict
from runpoint.core.types import IN_FLIGHT, Message, Run, RunEvent, RunStatus, now
from runpoint.durable.outages import Outlast
from runpoint.reads.streams import Streams
from runpoint.runs.context import RunContext
from runpoint.runs.crews import Crews
from runpoint.runs.event_log import EventLog
from runpoint.runs.execution import Execution, announce
from runpoint.seams.agent import Agent
from runpoint.seams.crew import Crew
from runpoint.seams.model import Model
from runpoint.seams.runqueue import Measured, QueuedRun, RunQueue

POLL_SECONDS = 0.05  # how often a request waiting on another run's progress looks again


class RunHandle:
    """A run that was started: its first state, its events (if streamed), its end."""

    def __init__(
        self,
        run: Run,
        stopped: Callable[[], Awaitable[Run]],
        batches: AsyncIterator[list[RunEvent]] | None,
        *,
        replayed: bool = False,
    ) -> None:
        self.run = run
        self._stopped = stopped
        self._batches = batches
        # the answer to a retried request (same Idempotency-Key): the first request's run,
        # whose events went to the first request
        self.replayed = replayed

    def batches(self) -> AsyncIterator[list[RunEvent]]:
        """The events of this execution, as its run's event log keeps them, in the batches
        they came in (see runpoint.reads.streams)."""
        if self._batches is None:
            raise RuntimeError("this run was started without streaming")
        return self._batches

    async def events(self) -> AsyncIterator[RunEvent]:
        """The events of this execution, one by one."""
        async for batch in self.batches():
            for event in batch:
                yield event

    async def result(self) -> Run:
        return await self._stopped()


class Executor:
    def __init__(self, context: RunContext, queue: RunQueue | None) -> None:
        self.storage = context.storage
        self.host = context.host
        self.leases = context.leases
        self.queries = context.queries
        self.outages = context.outages
        self.queue = queue
        self._active: dict[str, Execution] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self.streams = Streams(context.storage, POLL_SECONDS, self._joined)
        self.crews = Crews(context, self)

    async def open(
        self,
        *,
        execute_queued: bool,
        recover: bool,
        each_beat: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Take this process's share of the queue (if `execute_queued`), and with `recover`
        watch leases: renew this process's, resume runs whose process died, and do
        `each_beat` (see `Leases.watch`)."""
        agent_ids = list(self.queries.agents)
        if self.queue is not None:
            await self.queue.open(agent_ids if execute_queued else [], self._take)
        if recover:
            watch = self.leases.watch(
                lambda: list(self._active), agent_ids, self._recovered, each_beat
            )
            self._keep(asyncio.create_task(watch, name="lease watch"))

    async def close(self) -> None:
        if self.queue is not None:  # first, so no job starts a run while runs are stopped
            await self.queue.close()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)

    def accept(self, run: Run, *, background: bool, stream: bool) -> None:
        """Ready an accepted run for its write: PENDING until its first step in the
        background (a client will poll), else RUNNING; held by this process if it will
        execute here, left to nobody if it goes to the queue."""
        run.accept(background=background)
        if self._queued(background, stream):
            self.leases.offer(run)
        else:
            self.leases.stamp(run)

    async def begin(
        self,
        agent: Agent,
        run: Run,
        incoming: Sequence[Message],
        *,
        stream: bool,
        background: bool,
        resumed: bool = False,
    ) -> RunHandle:
        """Execute an accepted run (written since `accept`) here, or hand it to the run queue.
        A run begun unresumed was born with this request: it has no events yet."""
        if self._queued(background, stream):
            return await self._enqueue(run, incoming)
        return await self._start(agent, run, incoming, stream, resumed=resumed, born=not resumed)

    def relay_of(self, run: Run) -> EventLog | None:
        """The event log a member run's events are relayed to: its crew run's, if that
        run executes here (its leader runs its delegations) and streams its members'."""
        if run.parent_run_id is None or (crew := self._active.get(run.parent_run_id)) is None:
            return None
        relays = isinstance(crew.agent, Crew) and crew.agent.stream_member_events
        return crew.events if relays else None

    def _joined(self, run_id: str) -> None:
        """A follower here joined the run: what its events linger for, they wait no more."""
        if (execution := self._active.get(run_id)) is not None:
            execution.events.hurry()

    def refuse_active(self, run: Run) -> None:
        """Conflict if this process is executing the run."""
        if self.is_executing(run.run_id):
            raise Conflict(f"run {run.run_id} is in flight")

    def is_executing(self, run_id: str) -> bool:
        """Whether this process executes the run now."""
        # an execution that has paused or finished may still be winding down: no writer
        execution = self._active.get(run_id)
        return execution is not None and execution.run.status in IN_FLIGHT

    def cancel(self, run_id: str) -> bool:
        """Ask the run's execution here, if any, to stop at its next boundary. One whose
        run has stopped already (paused, ended: its last write done) has none: its
        caller cancels the stored run."""
        execution = self._active.get(run_id)
        if execution is None or execution.run.status not in IN_FLIGHT:
            return False
        execution.cancel_requested.set()
        return True

    def cancelling(self, run_id: str) -> bool:
        """Whether the run's execution here was asked to stop."""
        execution = self._active.get(run_id)
        return execution is not None and execution.cancelled()

    def executing(self) -> Counter[str]:
        """How many runs this process executes, by agent."""
        return Counter(e.run.agent_id for e in self._active.values() if e.run.status in IN_FLIGHT)

    async def queued(self) -> dict[str, int] | None:
        """How many runs wait in the run queue, by agent; None if there is no queue or it
        cannot say."""
        if isinstance(self.queue, Measured):
            return await self.queue.waiting()
        return None

    def follow(self, run: Run, *, replayed: bool = False) -> RunHandle:
        """A handle on a run executing elsewhere: its end is polled for when asked."""

        async def stopped() -> Run:
            current = run
            while current.status in IN_FLIGHT:
                await asyncio.sleep(POLL_SECONDS)
                current = await self.queries.run(run.run_id)
            return current

        return RunHandle(msgspec.structs.replace(run), stopped, None, replayed=replayed)

    def _queued(self, background: bool, stream: bool) -> bool:
        """Whether a new execution goes through the run queue rather than start here:
        a background run (one nobody streams) on a database with a queue."""
        return background and not stream and self.queue is not None

    async def _start(
        self,
        agent: Agent,
        run: Run,
        new_messages: Sequence[Message],
        stream: bool,
        *,
        resumed: bool = False,
        born: bool = False,
    ) -> RunHandle:
        """Execute a run here (claimed: no earlier writer can add to its event log now);
        `born`: just written, its event log is empty (nothing to ask the storage)."""
        outlast = Outlast(self.outages, self.leases, run)
        last_seq = 0 if born else await outlast(lambda: self.storage.last_event_seq(run.run_id))
        events = EventLog(
            self.storage,
            run,
            last_seq,
            lambda: self.streams.stored(run.run_id),
            outlast,
            lambda: stream or self.streams.following(run.run_id),
        )
        events.relay = self.relay_of(run)
        execution = Execution(
            agent=agent,
            model=self._model(agent, run),
            policy_name=agent.checkpoint,
            policy=self.host.policy(agent),
            storage=self.storage,
            leases=self.leases,
            outlast=outlast,
            hook=self.host.hook,
            run=run,
            events=events,
            watched=stream,
            incoming=new_messages,
            # a run whose log has events has been executed before: so is a continue taken
            # from the run queue, which cannot say it is one
            resumed=resumed or last_seq > 0 or run.forked_from_run_id is not None,
            delegate=self.crews.delegate if isinstance(agent, Crew) else None,
        )
        self._active[run.run_id] = execution

        async def execute() -> Run:
            try:
                ended = await execution.execute()
            finally:
                await events.close()
                if self._active.get(run.run_id) is execution:  # not a later execution's
                    del self._active[run.run_id]
            if ended.status not in (RunStatus.PAUSED, *IN_FLIGHT) and isinstance(agent, Crew):
                await self.crews.settle(ended)
            return ended

        started = msgspec.structs.replace(run)
        running = asyncio.create_task(execute(), name=f"run {run.run_id}")
        self._keep(running)
        # the log holds `last_seq` (its end when this execution began): nothing to read
        follow = self.streams.follow(started, last_seq, stored=True) if stream else None
        return RunHandle(started, lambda: asyncio.shield(running), follow)

    async def _enqueue(self, run: Run, incoming: Sequence[Message]) -> RunHandle:
        """Put an accepted PENDING run on the queue. Its input and tool decisions were
        written with it, so whoever takes it (the job's process, or the lease watch if no
        process claims it in time) needs nothing but the run."""
        assert self.queue is not None
        announce(self.host.hook, run, incoming)
        await self.queue.put(QueuedRun(run.run_id, run.agent_id))
        return self.follow(run)

    async def _take(self, job: QueuedRun) -> None:
        """Execute a run from the queue if it still waits: claim it (one process wins, by
        the run's revision) and run it here until it stops. The claim outlasts an outage
        shorter than a lease: else the run would wait for the lease watch."""
        until = now() + self.leases.lease_seconds
        if (run := await self.outages.outlasted(lambda: self._claim(job), until)) is None:
            return
        agent = self.queries.agent(run.agent_id)
        handle = await self._start(agent, run, [], False)
        await handle.result()

    async def _claim(self, job: QueuedRun) -> Run | None:
        run = await self.storage.get_run(job.run_id)
        if run is None or run.status is not RunStatus.PENDING:
            return None  # cancelled, or taken by the lease watch
        run.start()
        self.leases.stamp(run)
        try:
            await self.storage.save(run, [], None)
        except Conflict:
            return None  # cancelled or claimed meanwhile
        return run

    async def _recovered(self, run: Run) -> RunHandle | None:
        """Resume a run claimed from a process that died, or tell of one given up."""
        if run.parent_run_id is not None:  # a member its ended crew run left: no leader
            await self.crews.left_behind(run)
            return None
        if run.status is RunStatus.ERROR:
            self.streams.stored(run.run_id)
            self.host.hook.runpoint_run_finished(run=run)
            if isinstance(self.queries.agent(run.agent_id), Crew):  # given up
                await self.crews.settle(run)
            return None
        self.host.hook.runpoint_run_recovered(run=run)
        agent = self.queries.agent(run.agent_id)
        return await self._start(agent, run, [], False, resumed=True)

    def _keep(self, task: asyncio.Task[Any]) -> None:
        """Hold a background task until it ends (asyncio keeps only weak references)."""
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _model(self, agent: Agent, run: Run) -> Model:
        """The run's model: the one a continue with `model` switched it to (kept for every
        later execution of it), else its agent's."""
        if run.model is not None and run.model != agent.model_name:
            return self.host.model(run.model)
        return self.host.model(agent.model) if isinstance(agent.model, str) else agent.model
