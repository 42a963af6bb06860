"""Reads: agents, runs, a run's checkpoint timeline and its snapshot at a boundary.

Every lookup of a run goes through `Queries.run`, which refuses another team's run
(`runpoint.core.tenancy`) and one that is not under the session or agent the caller named.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Generic, TypeVar

import msgspec

from runpoint.core import tenancy, transcript
from runpoint.core.errors import InvalidBoundary, NotFound
from runpoint.core.types import (
    Checkpoint,
    Message,
    MessageView,
    Run,
    RunStatus,
    Segment,
    ToolExecutionOf,
)
from runpoint.seams.agent import Agent
from runpoint.seams.storage import Storage
from runpoint.sessions.lifecycle import Sessions

# a transcript read to run or inspect it (messages), or to show it (views: see MessageView)
M = TypeVar("M", Message, MessageView)
Read = Callable[[Sequence[Segment], int], Awaitable[list[M]]]


class RunDetail(msgspec.Struct, Generic[M]):
    """A run with its transcript and tool executions (their arguments as its messages
    hold them: decoded, or JSON text in views)."""

    run: Run
    messages: list[M]
    tools: list[ToolExecutionOf[Any]]


class Snapshot(msgspec.Struct, Generic[M]):
    """A run as it was at a boundary. `message_index` is the boundary actually used:
    the requested one snapped down so no tool call is cut from its result."""

    requested_index: int
    message_index: int
    checkpoint: Checkpoint | None
    detail: RunDetail[M]


class Queries:
    def __init__(self, agents: Iterable[Agent], storage: Storage, sessions: Sessions) -> None:
        self.agents = {agent.id: agent for agent in agents}
        self.storage = storage
        self.sessions = sessions
        # whole transcripts, read as messages (to run or inspect) or as views (to show)
        self.messages = Transcripts(self, storage.read_messages)
        self.views = Transcripts(self, storage.read_views)

    def agent(self, agent_id: str) -> Agent:
        try:
            return self.agents[agent_id]
        except KeyError:
            raise NotFound(f"agent {agent_id} not found") from None

    async def run(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> Run:
        """The run, if it is the current team's and under the session and agent named."""
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

    async def list_runs(self, session_id: str) -> list[Run]:
        await self.sessions.get(session_id)
        return await self.storage.list_runs(session_id)

    async def timeline(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> tuple[Run, list[Checkpoint]]:
        run = await self.run(run_id, session_id=session_id, agent_id=agent_id)
        return run, await self.checkpoints(run)

    async def checkpoints(self, run: Run) -> list[Checkpoint]:
        """The run's checkpoints, inherited ones included, by message index."""
        return await self.storage.list_checkpoints(run.segments)


class Transcripts(Generic[M]):
    """The reads of a run with its transcript, as `read` gives it (messages or views)."""

    def __init__(self, queries: Queries, read: Read[M]) -> None:
        self.queries = queries
        self.read: Read[M] = read

    async def get_run(
        self, run_id: str, *, session_id: str | None = None, agent_id: str | None = None
    ) -> RunDetail[M]:
        run = await self.queries.run(run_id, session_id=session_id, agent_id=agent_id)
        return await self.whole(run)

    async def list_run_details(self, session_id: str) -> list[RunDetail[M]]:
        """A session's live runs, oldest first, each with its transcript."""
        return [await self.whole(run) for run in await self.queries.list_runs(session_id)]

    async def whole(self, run: Run) -> RunDetail[M]:
        """The run (as `Queries.run` gave it) with its whole transcript."""
        return self._detail(run, await self.read(run.segments, run.message_count))

    async def snapshot(
        self,
        run_id: str,
        message_index: int,
        *,
        session_id: str | None = None,
        agent_id: str | None = None,
    ) -> Snapshot[M]:
        run = await self.queries.run(run_id, session_id=session_id, agent_id=agent_id)
        return await self.at(run, message_index)

    async def at(self, run: Run, message_index: int) -> Snapshot[M]:
        """The run (as `Queries.run` gave it) as it was at a boundary."""
        if not 0 <= message_index <= run.message_count:
            raise InvalidBoundary(
                f"message_index {message_index} is outside this run's boundaries "
                f"0..{run.message_count}"
            )
        messages = await self.read(run.segments, message_index)
        index = transcript.safe_boundary(messages, message_index)
        messages = messages[:index]
        earlier = await self.queries.storage.list_checkpoints(run.segments, upto=index)
        checkpoint = earlier[-1] if earlier and earlier[-1].message_index == index else None
        if checkpoint is not None:
            status = checkpoint.status
        else:
            status = run.status if index == run.message_count else RunStatus.RUNNING
        own = messages[run.own_start :]
        as_of = msgspec.structs.replace(
            run,
            status=status,
            content=transcript.final_content(own),
            usage=transcript.total_usage(own),
            message_count=index,
            error=run.error if index == run.message_count else None,
            cancel_requested=run.cancel_requested and index == run.message_count,
            last_checkpoint_at_message_index=earlier[-1].message_index if earlier else None,
            edits=[e for e in run.edits if e.message_index < index],
        )
        return Snapshot(message_index, index, checkpoint, self._detail(as_of, messages))

    def _detail(self, run: Run, messages: list[M]) -> RunDetail[M]:
        agent = self.queries.agents.get(run.agent_id)
        confirm = {n: t.requires_confirmation for n, t in agent.tool_map.items()} if agent else {}
        executions = transcript.tool_executions(messages, confirm, run.in_doubt)
        return RunDetail(run, messages, executions)
