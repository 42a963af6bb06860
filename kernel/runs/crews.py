"""A crew run's tree: each delegation of its leader is a run of the member (a child run,
`parent_run_id` and `parent_tool_call_id` its link), with its own messages, tool batches,
checkpoints, status and usage.

A member's run id is made from its crew run's id and the delegation call's, so a
delegation run again (the leader resumed after its process died, or after a pause) finds
the run it started and picks it up where it is: a finished member's answer is read, an
unfinished one resumed from its own last boundary (as the lease watch resumes any run),
and none runs a finished tool call again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from runpoint.core import transcript
from runpoint.core.errors import Conflict, InvalidRequest
from runpoint.core.types import IN_FLIGHT, Decision, Message, Run, RunStatus, Segment, ToolCall
from runpoint.durable.leases import Leases
from runpoint.durable.outages import Outlast
from runpoint.reads import continue_points
from runpoint.runs import tool_calls
from runpoint.runs.context import RunContext
from runpoint.seams.agent import Agent
from runpoint.seams.crew import Crew, MembersPaused, member_run_id
from runpoint.seams.storage import Storage

if TYPE_CHECKING:
    from runpoint.runs.executor import Executor

log = logging.getLogger("runpoint.recovery")


class Crews:
    def __init__(self, context: RunContext, executor: Executor) -> None:
        self.storage = context.storage
        self.queries = context.queries
        self.leases = context.leases
        self.outages = context.outages
        self.executor = executor

    async def delegate(self, crew_run: Run, call: ToolCall, member_id: str, task: str) -> str:
        """Run (or pick up) the member run of the leader's delegation `call`: its answer,
        an error the leader reads if it failed, or MembersPaused if it waits for a person."""
        crew = self.queries.agent(crew_run.agent_id)
        if not isinstance(crew, Crew) or member_id not in crew.members:
            known = ", ".join(crew.members) if isinstance(crew, Crew) else ""
            raise ValueError(f"no member {member_id!r} in this team (members: {known})")
        if self.executor.cancelling(crew_run.run_id):  # its members are being cancelled
            raise RuntimeError(f"the team run was cancelled: {member_id} was not given the task")
        # through an outage, as the crew run's writes are (while it holds its lease): run
        # again, the delegation finds its member run where the outage left it; past the
        # lease, the outage stops the crew run (not a failure of the call: see
        # `tool_calls.run`), for the lease watch to resume
        outlast = Outlast(self.outages, self.leases, crew_run)
        run = await outlast(partial(self._run, self.queries.agent(member_id), crew_run, call, task))
        return await outlast(partial(self._answer, run, member_id))

    async def _run(self, member: Agent, crew_run: Run, call: ToolCall, task: str) -> Run:
        """The delegation's member run, started, resumed or read, once it stopped."""
        run_id = member_run_id(crew_run.run_id, call.id)
        run = await self.storage.get_run(run_id)
        # executed by another process, or it was until its lease runs out (it died)
        while run is not None and self.leases.is_held_elsewhere(run):
            await asyncio.sleep(self.leases.lease_seconds / 10)
            run = await self.storage.get_run(run_id)
        if run is None:
            return await self._start(member, crew_run, call, task)
        if run.status is RunStatus.PAUSED or run.status in IN_FLIGHT:
            return await self._resume(member, run)
        await self._catch_up(run)
        return run

    @staticmethod
    def _unstarted(run: Run) -> bool:
        """Made for the delegation by a continue from a member's checkpoint, and never
        executed (`runpoint.runs.member_continue`): nobody ever held it."""
        return run.status is RunStatus.PENDING and run.lease_expires_at is None

    async def _start(self, member: Agent, crew_run: Run, call: ToolCall, task: str) -> Run:
        run_id = member_run_id(crew_run.run_id, call.id)
        run = Run(
            run_id=run_id,
            session_id=crew_run.session_id,
            agent_id=member.id,
            team_id=crew_run.team_id,
            user_id=crew_run.user_id,
            input=task,
            model=member.model_name,
            policy=member.checkpoint,
            segments=[Segment(run_id, 0)],
            message_count=1,  # its task
            parent_run_id=crew_run.run_id,
            parent_tool_call_id=call.id,
        )
        incoming = [Message(role="user", content=task)]
        self.executor.accept(run, background=False, stream=False)
        await self.storage.create_runs([run], {run_id: incoming})
        # a cancel of the crew run from another process asks it, then cancels the member
        # runs it finds: one written after it looked is cancelled here (it stops at once)
        if (crew := await self.storage.get_run(crew_run.run_id)) and crew.cancel_requested:
            run.request_cancel()
        handle = await self.executor.begin(member, run, incoming, stream=False, background=False)
        return await handle.result()

    async def _resume(self, member: Agent, run: Run) -> Run:
        """Claim a member run that stopped (paused, or its process died) or never started
        and execute it here from its own last boundary; if another claimed it first, wait
        for it."""
        if self.executor.is_executing(run.run_id):
            return await self.executor.follow(run).result()
        unstarted = self._unstarted(run)
        if run.status in IN_FLIGHT and not unstarted:
            run.recover()
        self.executor.accept(run, background=False, stream=False)
        try:
            await self.storage.save(run, [], None)
        except Conflict:  # the lease watch, or another process, took it
            return await self.executor.follow(run).result()
        if not unstarted:  # claimed: nobody else adds to its log
            await self._catch_up(run)
        handle = await self.executor.begin(
            member, run, [], stream=False, background=False, resumed=not unstarted
        )
        return await handle.result()

    async def _catch_up(self, run: Run) -> None:
        """Relay the member run's events that were stored but not relayed to its crew run's
        log (its process died between), before it goes on."""
        if (log := self.executor.relay_of(run)) is not None:
            await log.catch_up(run)

    async def _answer(self, run: Run, member_id: str) -> str:
        if run.status is RunStatus.COMPLETED:
            return run.content or ""
        if run.status is RunStatus.PAUSED:
            raise MembersPaused(await self._waiting(run))
        if run.status is RunStatus.CANCELLED:
            raise RuntimeError(f"{member_id}'s run was cancelled")
        raise RuntimeError(f"member {member_id}'s run ended {run.status.value}: {run.error}")

    async def _waiting(self, run: Run) -> list[dict[str, Any]]:
        """The paused member run's calls, as its RunPaused told of them."""
        messages = await self.storage.read_messages(run.segments, run.message_count)
        return [
            tool_calls.info(c)
            | {
                "member_id": run.agent_id,
                "member_run_id": run.run_id,
                "in_doubt": c.id in run.in_doubt,
            }
            for c in transcript.unanswered_calls(messages)
        ]

    async def pass_decisions(
        self, crew_run: Run, decisions: Mapping[str, Decision], member: str | None
    ) -> None:
        """A person's decisions on the calls the crew run's paused members (or only
        `member`) wait on, given to each member run (with the continue of the crew run they
        resume it, read as any run's decisions are). A call id is unique only within its
        run: one paused in several members must name its `member`. InvalidRequest if one
        names no such call, or more than one."""
        paused = []
        for run in await self.storage.member_runs(crew_run.run_id):
            if run.status is RunStatus.PAUSED and member in (None, run.run_id):
                messages = await self.storage.read_messages(run.segments, run.message_count)
                paused.append((run, transcript.unanswered_calls(messages)))
        named = Counter(c.id for _, pending in paused for c in pending if c.id in decisions)
        if shared := sorted(i for i, n in named.items() if n > 1):
            raise InvalidRequest(
                f"the tool call id(s) {shared} are paused in more than one member run: "
                "decide each member's with its member_run_id"
            )
        left = dict(decisions)
        for run, pending in paused:
            mine = {c.id: left.pop(c.id) for c in pending if c.id in left}
            if mine:
                agent = self.queries.agent(run.agent_id)
                run.continue_with(0, tool_calls.checked(agent, pending, mine), None)
                await self.storage.save(run, [], None)
        if left:
            raise InvalidRequest(f"no paused tool call has the id(s) {sorted(left)}")

    async def unfinished_members(self, crew_run: Run) -> list[Run]:
        """The crew run's member runs that have not ended (cancelled with it)."""
        alive = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED)
        return [r for r in await self.storage.member_runs(crew_run.run_id) if r.status in alive]

    async def settle(self, crew_run: Run) -> None:
        """End the member runs that the crew run, now ended, left in flight: nobody would
        resume them (its leader delegates no more). So are those of a process that died
        while its crew run was cancelled or given up, and those of a leader from before
        delegating turns were written first (its calls asked again, under new ids)."""
        try:
            for member in await self.storage.member_runs(crew_run.run_id):
                if not self.leases.is_held_elsewhere(member) and not self.executor.is_executing(
                    member.run_id
                ):
                    await self.left_behind(member)
        except Exception:  # the crew run has ended all the same
            log.exception("members of run %s left for the lease watch", crew_run.run_id)

    async def left_behind(self, member: Run) -> None:
        """Cancel a member run in flight that its ended crew run left (`settle`; the lease
        watch finds them too: `Storage.expired_runs`)."""
        if member.status in IN_FLIGHT:
            with contextlib.suppress(Conflict):  # another writer took it: it is theirs
                await end_cancelled(self.storage, self.leases, member)
                log.info("member run %s, left by its ended team run, cancelled", member.run_id)


async def end_cancelled(storage: Storage, leases: Leases, run: Run) -> None:
    """End a run that nobody executes (paused, or its process died) as cancelled, naming
    the calls its lost process may have left in doubt. Conflict if another writer took
    it meanwhile."""
    in_doubt = None
    if run.status in IN_FLIGHT:
        in_doubt = await continue_points.calls_in_doubt(storage, run)
    run.cancel(in_doubt)
    leases.stamp(run)
    await storage.save(run, [], None)
