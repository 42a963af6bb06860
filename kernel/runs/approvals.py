"""Approvals: the inbox of paused runs' calls that wait for a person, and deciding them.

A run that pauses (`Execution.pause`) writes the approval of the calls it waits on before
its pause, so a pause that was written always has its approval (a pause written again
after a crash is the same approval). Resolving one is exactly a continue of its run with
`tools` (`Commands.continue_run`): the same checks (edited arguments against the tool's
schema), the same decisions, the run resumed in the background; then the approval is
settled, once (a second resolve is a Conflict).

Every process that watches leases also settles approvals past their `expires_at`, as their
agent says (`Agent.approval_expiry`): the calls rejected with a reason the model reads, or
the run cancelled. The action goes first and the settle after, so a process that dies in
between leaves a due approval that the next beat of any process settles (its action then
finds the run moved on, and does nothing). They settle `cancelled` the approvals whose run
left the pause by another route (a continue, a cancel, a rollback), once the run has stood
still for `STILL_FOR`; removing a run removes its approvals (see the storage seam).
"""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from runpoint.core import tenancy
from runpoint.core.errors import (
    Conflict,
    InvalidArguments,
    InvalidRequest,
    NotContinuable,
    NotFound,
)
from runpoint.core.tenancy import Principal
from runpoint.core.types import (
    IN_FLIGHT,
    Approval,
    ApprovalQuery,
    ApprovalStatus,
    Approve,
    Decision,
    Reject,
    now,
)
from runpoint.runs.commands import Commands
from runpoint.runs.continuation import ContinueRun
from runpoint.seams.agent import Agent
from runpoint.seams.storage import Storage

log = logging.getLogger("runpoint.approvals")
DUE_BATCH = 100  # approvals one beat settles at most
# how long a run must have stood outside its pause before its approval is taken for left
# behind: a resolve settles its approval just after it continues the run
STILL_FOR = 60.0
MOVED_ON = "The run went on without this approval (continued, cancelled or rolled back)."
EXPIRED = "Nobody decided on this tool call in time (its approval expired); it was not run."
# what of a run moved on without the approval (a lost race, or a decision made otherwise)
_MOVED_ON = (Conflict, NotContinuable, InvalidRequest, NotFound)


class Resolution(msgspec.Struct, frozen=True, forbid_unknown_fields=False):
    """What `resolution_data` may say besides notes of the client's own: why a rejection
    (the model reads it), edited arguments (an approval of one call), or the call's result
    given by the person instead of running it."""

    note: str | None = None
    tool_args: dict[str, Any] | None = None
    result: str | None = None


def decisions(
    approval: Approval, status: ApprovalStatus, data: dict[str, Any] | None
) -> dict[str, Decision]:
    """The decision on each of the approval's calls that resolving it `status` with
    `data` is, as a continue's `tools` carry them."""
    try:
        said = msgspec.convert(data or {}, Resolution)
    except msgspec.ValidationError as exc:
        raise InvalidArguments(f"resolution_data: {exc}") from None
    decision: Decision
    if status == "rejected":
        if said.tool_args is not None or said.result is not None:
            raise InvalidArguments(
                "resolution_data.tool_args and resolution_data.result apply only to an "
                "approval (status approved)"
            )
        decision = Reject(said.note) if said.note and said.note.strip() else False
    elif status != "approved":
        raise InvalidArguments(f"status must be approved or rejected, not {status!r}")
    elif said.result is not None:
        decision = said.result
    elif said.tool_args is not None:
        if len(approval.calls) != 1:
            raise InvalidArguments(
                "resolution_data.tool_args edits the arguments of an approval of one call; "
                f"this one has {len(approval.calls)}"
            )
        decision = Approve(said.tool_args)
    else:
        decision = True
    return {c.tool_call_id: decision for c in approval.calls}


class Approvals:
    def __init__(self, storage: Storage, agents: dict[str, Agent], commands: Commands) -> None:
        self.storage = storage
        self.agents = agents
        self.commands = commands

    async def get(self, approval_id: str) -> Approval:
        """The approval, if it is the current team's (another team's is unknown)."""
        approval = await self.storage.get_approval(approval_id)
        if approval is None or approval.team_id != tenancy.current().team:
            raise NotFound(f"approval {approval_id} not found")
        return approval

    async def list(
        self, query: ApprovalQuery, *, limit: int, offset: int
    ) -> tuple[list[Approval], int]:
        """A page of the current team's approvals, and how many there are in all."""
        query = msgspec.structs.replace(query, team_id=tenancy.current().team)
        return await self.storage.list_approvals(query, limit=limit, offset=offset)

    async def count(self, user_id: str | None = None) -> int:
        """How many of the team's approvals wait for a person."""
        query = ApprovalQuery(team_id=tenancy.current().team, status="pending", user_id=user_id)
        return (await self.storage.list_approvals(query, limit=0, offset=0))[1]

    async def delete(self, approval_id: str) -> None:
        """Forget the approval (its run, if still paused, waits for a continue)."""
        await self.get(approval_id)
        if not await self.storage.delete_approval(approval_id):
            raise NotFound(f"approval {approval_id} not found")

    async def resolve(
        self,
        approval_id: str,
        status: ApprovalStatus,
        resolved_by: str | None,
        resolution_data: dict[str, Any] | None = None,
    ) -> Approval:
        """Decide the approval's calls and resume its run with the decision (see the module);
        `resolved_by` is the principal's user where it has one."""
        approval = await self.get(approval_id)
        if approval.status != "pending":
            raise Conflict(f"approval {approval_id} is {approval.status} already")
        if approval.expires_at is not None and approval.expires_at <= now():
            raise Conflict(f"approval {approval_id} expired")
        decided = decisions(approval, status, resolution_data)
        request = await self._continue(approval, decided)
        try:
            await self.commands.continue_run(request)
        except _MOVED_ON as exc:
            raise Conflict(f"approval {approval_id}: its run went on without it ({exc})") from exc
        resolved_by = tenancy.current().user or resolved_by
        settled = await self.storage.settle_approval(
            approval_id, status, resolved_by, resolution_data
        )
        if settled is None:
            raise Conflict(f"approval {approval_id} was settled by another request")
        return settled

    async def expire_due(self) -> int:
        """Settle the approvals past their time, as their agents say; how many."""
        settled = 0
        for approval in await self.storage.due_approvals(now(), DUE_BATCH):
            agent = self.agents.get(approval.agent_id)
            if agent is None:
                continue  # another server's agent: that server settles it
            with tenancy.acting_as(Principal(approval.team_id, approval.user_id)):
                try:
                    await self._expire(agent, approval)
                except _MOVED_ON as exc:
                    log.info("approval %s expired after its run went on: %s", approval.id, exc)
            data = {"action": agent.approval_expiry, "reason": EXPIRED}
            if await self.storage.settle_approval(approval.id, "expired", None, data):
                settled += 1
        return settled

    async def beat(self) -> None:
        """What the lease watch does at each beat: settle approvals expired or left behind."""
        await self.expire_due()
        await self.settle_stale()

    async def settle_stale(self, still_for: float = STILL_FOR) -> int:
        """Settle `cancelled` the pending approvals whose run went on without them; how many."""
        settled = 0
        for approval in await self.storage.stale_approvals(DUE_BATCH):
            run = await self.storage.get_run(approval.run_id)
            if run is not None and run.updated_at > now() - still_for:
                continue  # maybe a resolve between its continue and its settle
            data = {"reason": MOVED_ON, "run_status": run.status.value if run else None}
            if await self.storage.settle_approval(approval.id, "cancelled", None, data):
                settled += 1
        return settled

    async def _expire(self, agent: Agent, approval: Approval) -> None:
        if agent.approval_expiry == "cancel":
            run_id, session_id, agent_id = await self._deciding(approval)
            await self.commands.cancel(run_id, session_id=session_id, agent_id=agent_id)
            return
        rejected: dict[str, Decision] = {c.tool_call_id: Reject(EXPIRED) for c in approval.calls}
        await self.commands.continue_run(await self._continue(approval, rejected))

    async def _continue(self, approval: Approval, decided: dict[str, Decision]) -> ContinueRun:
        run_id, session_id, agent_id = await self._deciding(approval)
        # a member's calls are decided through its crew run, named: a call id is unique
        # only within its own run
        member = msgspec.UNSET if run_id == approval.run_id else approval.run_id
        return ContinueRun(
            run_id=run_id,
            session_id=session_id,
            agent_id=agent_id,
            tools=decided,
            background=True,
            member_run_id=member,
        )

    async def _deciding(self, approval: Approval) -> tuple[str, str, str]:
        """The run a decision on the approval goes to (its id, session and agent): its own,
        or, for a member run's, its crew run's, whose continue with the decisions resumes
        both (a member run goes on only through its leader). Conflict while the crew run
        still executes (other members): it pauses once they are done; decide then."""
        own = approval.run_id, approval.session_id, approval.agent_id
        run = await self.storage.get_run(approval.run_id)
        if run is None or run.parent_run_id is None:
            return own
        if (crew := await self.storage.get_run(run.parent_run_id)) is None:
            return own
        if crew.status in IN_FLIGHT:
            raise Conflict(
                f"the team run {crew.run_id} is {crew.status.value}: decide its member's "
                "calls once it has paused"
            )
        return crew.run_id, crew.session_id, crew.agent_id
