"""Commands: create a run, continue one (`runpoint.runs.continuation`), fan one out
(`runpoint.runs.fan_out`), cancel one, fork a session.

Each command that takes an Idempotency-Key takes one request struct, which is also its
fingerprint (`runpoint.durable.idempotency`): what only says how the answer is delivered (`stream`)
is an argument beside it. Every command validates its request completely before it starts
anything.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Literal

import msgspec

from runpoint.core import tenancy
from runpoint.core.errors import Conflict, InvalidRequest, NotFound
from runpoint.core.types import (
    IN_FLIGHT,
    KeyAnswer,
    KeyClaim,
    Message,
    Run,
    RunStatus,
    Segment,
    Session,
    new_id,
)
from runpoint.durable import idempotency
from runpoint.runs import member_continue
from runpoint.runs.context import RunContext
from runpoint.runs.continuation import Continuation, ContinueRun
from runpoint.runs.crews import end_cancelled
from runpoint.runs.executor import POLL_SECONDS, Executor, RunHandle
from runpoint.runs.fan_out import FanOut, fan_out
from runpoint.seams.agent import Agent
from runpoint.sessions.lifecycle import fork_runs, forked_session, with_members, writing_copies


class CreateRun(msgspec.Struct, frozen=True, kw_only=True):
    """A new run of `agent_id` on `message`, in session `session_id` (made if it does not
    exist, or a new one), with `model` instead of the agent's if given. With `background`
    it is PENDING until its first step."""

    agent_id: str
    message: str
    session_id: str | None = None
    user_id: str | None = None
    background: bool = False
    # unset, not None: left out of the fingerprint, so keys claimed before it existed match
    model: str | msgspec.UnsetType = msgspec.UNSET


class ForkSession(msgspec.Struct, frozen=True, kw_only=True):
    """A new session with the same history as `session_id`."""

    session_id: str
    agent_id: str | None = None


class Commands:
    def __init__(
        self,
        context: RunContext,
        executor: Executor,
        *,
        busy_session: Literal["conflict", "wait"],
        busy_timeout: float,
    ) -> None:
        self.storage = context.storage
        self.host = context.host
        self.leases = context.leases
        self.queries = context.queries
        self.sessions = context.sessions
        self.executor = executor
        self.continuation = Continuation(context, executor)
        self.busy_session = busy_session
        self.busy_timeout = busy_timeout

    # -- create --------------------------------------------------------------------

    async def create_run(
        self, request: CreateRun, *, stream: bool = False, idempotency_key: str | None = None
    ) -> RunHandle:
        """Start a run; either way it goes on without the caller."""
        start = partial(self._create_run, request, stream)
        if idempotency_key is None:
            return await start(None)
        operation = f"create_run {request.agent_id}"
        return await self._once(idempotency_key, operation, request, start)

    async def _create_run(
        self, request: CreateRun, stream: bool, claim: KeyClaim | None
    ) -> RunHandle:
        agent = self.queries.agent(request.agent_id)
        if not request.message.strip():
            raise InvalidRequest("message must not be empty")
        if request.model:
            self.host.model(request.model)  # unknown providers fail here, before any write
        incoming = [Message(role="user", content=request.message)]
        joined = await self._joined_session(request)
        session = joined or Session(
            session_id=request.session_id or new_id(),
            agent_id=request.agent_id,
            team_id=tenancy.current().team,
            user_id=request.user_id,
        )
        run = self._new_run(agent, session, request, stream)
        answer = idempotency.answering(claim, run.run_id)
        if joined is not None:
            run = await self._start_in_session(run, incoming, answer)
        else:  # the session and its first run (with its input) in one write
            try:
                await self.storage.create_sessions(
                    [session], [run], {run.run_id: incoming}, answering=answer
                )
            except Conflict:  # a concurrent request created the session: join it
                return await self._create_run(request, stream, claim)
        return await self.executor.begin(
            agent, run, incoming, stream=stream, background=request.background
        )

    async def _joined_session(self, request: CreateRun) -> Session | None:
        """The existing session the run joins, if it takes one (None: a new session)."""
        if not request.session_id:
            return None
        session = await self.storage.get_session(request.session_id)
        if session is None:
            return None
        tenancy.check(session.team_id, "session", session.session_id)
        if session.agent_id != request.agent_id:
            raise InvalidRequest(
                f"session {request.session_id} belongs to agent {session.agent_id}"
            )
        await self.sessions.settle_lock(session)
        return session

    def _new_run(self, agent: Agent, session: Session, request: CreateRun, stream: bool) -> Run:
        run_id = new_id()
        run = Run(
            run_id=run_id,
            session_id=session.session_id,
            agent_id=agent.id,
            team_id=session.team_id,
            user_id=request.user_id or session.user_id,
            input=request.message,
            model=request.model or agent.model_name,
            policy=agent.checkpoint,
            segments=[Segment(run_id, 0)],
            message_count=1,  # its input
        )
        self.executor.accept(run, background=request.background, stream=stream)
        return run

    async def _start_in_session(
        self, run: Run, incoming: list[Message], answer: KeyAnswer | None
    ) -> Run:
        """Write the run as its session's next; if a run of the session is in flight, fail
        with Conflict or (`busy_session="wait"`) wait for it, up to `busy_timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.busy_timeout
        while True:
            try:
                return await self.storage.start_in_session(run, incoming, answering=answer)
            except Conflict:
                if self.busy_session != "wait" or loop.time() >= deadline:
                    raise
                await asyncio.sleep(POLL_SECONDS)

    # -- continue ------------------------------------------------------------------

    async def continue_run(
        self, request: ContinueRun, *, stream: bool = False, idempotency_key: str | None = None
    ) -> RunHandle:
        """Resume a run in place, or start a new run from one of its boundaries (see
        `runpoint.runs.continuation`), or from a crew run's member run's
        (`runpoint.runs.member_continue`; with `tools`, the member run they decide)."""
        if request.member_run_id is msgspec.UNSET or request.tools:
            start = partial(self.continuation.start, request, stream)
        else:
            member = request.member_run_id
            start = partial(member_continue.start, self.continuation, request, member, stream)
        if idempotency_key is None:
            return await start(None)
        operation = f"continue_run {request.agent_id} {request.run_id}"
        return await self._once(idempotency_key, operation, request, start)

    async def fan_out(
        self, request: FanOut, *, idempotency_key: str | None = None
    ) -> list[RunHandle]:
        """Fork a run at one boundary into several new runs, begun together (see
        `runpoint.runs.fan_out`); a retry with the same key gets the first request's runs."""
        start = partial(fan_out, self.continuation, request)
        if idempotency_key is None:
            return await start(None)
        return await idempotency.once(
            self.storage,
            self.leases,
            idempotency_key,
            f"fan_out {request.agent_id} {request.run_id}",
            request,
            start,
            self._replay_all,
            wait_seconds=self.busy_timeout,
        )

    # -- cancel and fork -----------------------------------------------------------

    async def cancel(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> Run:
        """Cancel a run. One executing (here or in another process) stops at its next
        boundary; one nobody executes (paused, or its process died) ends now; one that
        already ended stays as it is (cancel is idempotent: the answer says its status)."""
        run = await self.queries.run(run_id, session_id=session_id, agent_id=agent_id)
        # first, so that a crew run gives no task to a member from now on: executing here,
        # or elsewhere (its delegation reads the request once its member run is written:
        # a member run this sweep does not find is cancelled there)
        here = self.executor.cancel(run_id)
        elsewhere = (
            not here
            and self.leases.is_held_elsewhere(run)
            and await self.storage.request_cancel(run_id)
        )
        for member in await self.executor.crews.unfinished_members(run):  # its tree with it
            await self.cancel(member.run_id)
        if here:
            return run
        if elsewhere:
            run.request_cancel()
            return run
        if run.status not in (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED):
            return run  # cancel is idempotent: an ended run answers as it is
        try:
            await end_cancelled(self.storage, self.leases, run)
        except Conflict:  # a process took it off the queue meanwhile: ask that one to stop
            return await self.cancel(run_id, session_id=session_id, agent_id=agent_id)
        return run

    async def fork_session(
        self, request: ForkSession, *, idempotency_key: str | None = None
    ) -> Session:
        """A new session with the same history; its runs point at the source's rows."""
        if idempotency_key is None:
            return await self._fork_session(request, None)
        return await idempotency.once(
            self.storage,
            self.leases,
            idempotency_key,
            f"fork_session {request.agent_id} {request.session_id}",
            request,
            partial(self._fork_session, request),
            self.sessions.get,
            wait_seconds=self.busy_timeout,
        )

    async def _fork_session(self, request: ForkSession, claim: KeyClaim | None) -> Session:
        # its runs first, then the session: a removal (retention) that took its last run
        # after the runs were read took the session too, and is seen there; the other way
        # round, a session read before it and runs read after would make an empty fork
        source_runs = await with_members(
            self.storage, await self.storage.list_runs(request.session_id)
        )
        source = await self.sessions.get(request.session_id)
        if request.agent_id is not None and source.agent_id != request.agent_id:
            raise NotFound(f"session {request.session_id} not found for agent {request.agent_id}")
        if busy := [r.run_id for r in source_runs if r.status in IN_FLIGHT]:
            raise Conflict(f"session {request.session_id} has runs in flight: {', '.join(busy)}")
        session = forked_session(source, source.event_seq)
        copies = fork_runs(source_runs, session.session_id)
        await writing_copies(
            self.storage,
            self.host,
            source_runs,
            copies,
            lambda: self.storage.create_sessions(
                [session], copies, answering=idempotency.answering(claim, session.session_id)
            ),
        )
        return session

    # -- idempotency ---------------------------------------------------------------

    async def _once(
        self,
        key: str,
        operation: str,
        request: msgspec.Struct,
        start: Callable[[KeyClaim], Awaitable[RunHandle]],
    ) -> RunHandle:
        return await idempotency.once(
            self.storage,
            self.leases,
            key,
            operation,
            request,
            start,
            self._replay,
            wait_seconds=self.busy_timeout,
        )

    async def _replay(self, run_id: str) -> RunHandle:
        """A handle on a run another request started."""
        return self.executor.follow(await self.queries.run(run_id), replayed=True)

    async def _replay_all(self, run_ids: str) -> list[RunHandle]:
        return [await self._replay(run_id) for run_id in run_ids.split()]
