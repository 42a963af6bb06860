"""The facade's runs: start, continue, fan out and cancel them (each command takes its
request struct, as `runpoint.runs.commands` does), follow them, and read them."""

from __future__ import annotations

from collections.abc import AsyncIterator

from runpoint.core.types import Checkpoint, Message, Run, RunEvent
from runpoint.reads import diffs
from runpoint.reads.diffs import Diff
from runpoint.reads.queries import Queries, RunDetail, Snapshot
from runpoint.runs.commands import Commands, CreateRun
from runpoint.runs.continuation import ContinueRun
from runpoint.runs.executor import Executor, RunHandle
from runpoint.runs.fan_out import FanOut
from runpoint.seams.agent import Agent
from runpoint.seams.storage import Storage


class RunsFacade:
    """Half of `runpoint.facade.Runpoint`, which sets these."""

    storage: Storage
    queries: Queries
    executor: Executor
    commands: Commands

    def agent(self, agent_id: str) -> Agent:
        return self.queries.agent(agent_id)

    async def create_run(
        self, request: CreateRun, *, stream: bool = False, idempotency_key: str | None = None
    ) -> RunHandle:
        """Start a run. With `background` it is PENDING until its first step (to a client
        that will poll rather than wait); either way it goes on without the caller."""
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
        self, request: ContinueRun, *, stream: bool = False, idempotency_key: str | None = None
    ) -> RunHandle:
        """Resume a run in place, or start a new run from one of its boundaries (see
        `runpoint.runs.continuation`), with `edits` to the messages before it perhaps (a new
        run, see `runpoint.runs.edits`)."""
        return await self.commands.continue_run(
            request, stream=stream, idempotency_key=idempotency_key
        )

    async def fan_out(
        self, request: FanOut, *, idempotency_key: str | None = None
    ) -> list[RunHandle]:
        """Fork a run at one boundary into one new run per branch (1 to 8), all or
        nothing, executed concurrently (see `runpoint.runs.fan_out`)."""
        return await self.commands.fan_out(request, idempotency_key=idempotency_key)

    async def cancel(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> Run:
        """Cancel a run. One executing (here or in another process) stops at its next
        boundary; one nobody executes (paused, or its process died) ends now."""
        return await self.commands.cancel(run_id, session_id=session_id, agent_id=agent_id)
