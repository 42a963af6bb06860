"""An approval: a paused run's calls that wait for a person, as one item of an inbox.

A run pauses before a batch of tool calls that a person must decide (a tool that
requires confirmation, or a side-effecting call in doubt after its process died); the
calls it pauses on make one approval. Resolving it is the decision a continue with
`tools` applies (see `runpoint.runs.approvals`).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import msgspec

from runpoint.core.run import Run
from runpoint.core.stamps import now

ApprovalStatus = Literal["pending", "approved", "rejected", "expired", "cancelled"]
# a tool that requires confirmation; a side-effecting call that may or may not have run
PauseType = Literal["confirmation", "in_doubt"]
ExpiryAction = Literal["reject", "cancel"]
_IDS = uuid.UUID("6f1c4c8e-53a4-4bd6-9a46-2f0f3f0b7a51")


class WaitingCall(msgspec.Struct, frozen=True, omit_defaults=True):
    """One call an approval decides, as the model proposed it."""

    tool_call_id: str
    tool_name: str
    tool_args: dict[str, Any] = {}
    in_doubt: bool = False


class Approval(msgspec.Struct, omit_defaults=True):
    id: str
    run_id: str
    session_id: str
    agent_id: str
    team_id: str  # its run's team: only its principals see and decide it
    pause_type: PauseType
    calls: list[WaitingCall]
    user_id: str | None = None
    status: ApprovalStatus = "pending"
    expires_at: float | None = None
    created_at: float = msgspec.field(default_factory=now)
    updated_at: float = msgspec.field(default_factory=now)
    resolved_by: str | None = None
    resolved_at: float | None = None
    resolution_data: dict[str, Any] | None = None

    @classmethod
    def of(cls, run: Run, calls: list[WaitingCall], timeout: float | None) -> Approval:
        """The approval of `run`'s pause on `calls`. Its id is the same whenever the run
        pauses on the same calls for the same reason (a pause written twice, before and
        after a crash, is one approval); a call in doubt again after another crash is a
        new one."""
        in_doubt = any(c.in_doubt for c in calls)
        ids = ",".join(sorted(c.tool_call_id for c in calls))
        key = f"{run.run_id}/{ids}/{run.recoveries if in_doubt else ''}"
        created = now()
        return cls(
            id=str(uuid.uuid5(_IDS, key)),
            run_id=run.run_id,
            session_id=run.session_id,
            agent_id=run.agent_id,
            team_id=run.team_id,
            user_id=run.user_id,
            pause_type="in_doubt" if in_doubt else "confirmation",
            calls=calls,
            expires_at=None if timeout is None else created + timeout,
            created_at=created,
            updated_at=created,
        )

    def copied(self, run: Run) -> Approval:
        """This approval of a run's pause, pending again for `run`, the copy of that run a
        fork (or rollback) of its session made: the same calls, as long to decide from now
        as this one had, and decided on its own (its id is the copy's)."""
        timeout = None if self.expires_at is None else self.expires_at - self.created_at
        return Approval.of(run, self.calls, timeout)

    def settle(
        self,
        status: ApprovalStatus,
        resolved_by: str | None,
        resolution_data: dict[str, Any] | None,
    ) -> None:
        """Decided (approved, rejected), or left undecided until it expired."""
        self.status = status
        self.resolved_by = resolved_by
        self.resolution_data = resolution_data
        self.resolved_at = self.updated_at = now()


class ApprovalQuery(msgspec.Struct, frozen=True, kw_only=True):
    """Which approvals a list reads: a team's, and those of the filters given."""

    team_id: str
    status: ApprovalStatus | None = None
    pause_type: PauseType | None = None
    agent_id: str | None = None
    user_id: str | None = None
    run_id: str | None = None
    session_id: str | None = None
