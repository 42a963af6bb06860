"""AgentOS's approvals (`/approvals`): the inbox of paused runs' calls that wait for a
person, and resolving one (see runpoint.runs.approvals)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from runpoint.core.types import Approval, ApprovalQuery, ApprovalStatus, PauseType, RunStatus
from runpoint.facade import Runpoint

from .catalog_wire import PageInfo
from .handlers import Reply, agent_name, operation


class Requirement(msgspec.Struct):
    tool_call_id: str
    tool_name: str
    tool_args: dict[str, Any]
    in_doubt: bool


class ApprovalOut(msgspec.Struct):
    id: str
    run_id: str
    session_id: str
    status: ApprovalStatus
    pause_type: PauseType
    tool_name: str | None
    tool_args: dict[str, Any] | None
    expires_at: int | None
    agent_id: str
    user_id: str | None
    source_name: str | None
    requirements: list[Requirement]
    resolution_data: dict[str, Any] | None
    resolved_by: str | None
    resolved_at: int | None
    created_at: int
    updated_at: int
    run_status: RunStatus | None
    parent_run_id: str | None  # a member run's: its team run
    source_type: Literal["agent"] = "agent"
    approval_type: Literal["required"] = "required"
    team_id: None = None
    workflow_id: None = None


class ApprovalPage(msgspec.Struct):
    data: list[ApprovalOut]
    meta: PageInfo


class Count(msgspec.Struct):
    count: int


class StatusOut(msgspec.Struct):
    approval_id: str
    status: ApprovalStatus
    run_id: str
    resolved_at: int | None
    resolved_by: str | None


def _epoch(at: float | None) -> int | None:
    return None if at is None else int(at)


async def _out(rp: Runpoint, a: Approval) -> ApprovalOut:
    run = await rp.storage.get_run(a.run_id)
    first = a.calls[0] if a.calls else None
    return ApprovalOut(
        id=a.id,
        run_id=a.run_id,
        session_id=a.session_id,
        status=a.status,
        pause_type=a.pause_type,
        tool_name=first.tool_name if first else None,
        tool_args=first.tool_args if first else None,
        expires_at=_epoch(a.expires_at),
        agent_id=a.agent_id,
        user_id=a.user_id,
        source_name=agent_name(rp, a.agent_id),
        requirements=[
            Requirement(c.tool_call_id, c.tool_name, c.tool_args, c.in_doubt) for c in a.calls
        ],
        resolution_data=a.resolution_data,
        resolved_by=a.resolved_by,
        resolved_at=_epoch(a.resolved_at),
        created_at=int(a.created_at),
        updated_at=int(a.updated_at),
        run_status=None if run is None else run.status,
        parent_run_id=None if run is None else run.parent_run_id,
    )


@operation
async def list_approvals(
    rp: Runpoint,
    *,
    status: ApprovalStatus | None,
    pause_type: PauseType | None,
    agent_id: str | None,
    user_id: str | None,
    run_id: str | None,
    session_id: str | None,
    limit: int,
    page: int,
) -> Reply:
    query = ApprovalQuery(
        team_id="",  # the caller's, always
        status=status,
        pause_type=pause_type,
        agent_id=agent_id,
        user_id=user_id,
        run_id=run_id,
        session_id=session_id,
    )
    found, total = await rp.approvals.list(query, limit=limit, offset=(page - 1) * limit)
    return ApprovalPage([await _out(rp, a) for a in found], PageInfo.of(page, limit, total))


@operation
async def count_approvals(rp: Runpoint, *, user_id: str | None) -> Reply:
    return Count(await rp.approvals.count(user_id))


@operation
async def get_approval(rp: Runpoint, *, approval_id: str) -> Reply:
    return await _out(rp, await rp.approvals.get(approval_id))


@operation
async def get_approval_status(rp: Runpoint, *, approval_id: str) -> Reply:
    a = await rp.approvals.get(approval_id)
    return StatusOut(a.id, a.status, a.run_id, _epoch(a.resolved_at), a.resolved_by)


@operation
async def resolve_approval(
    rp: Runpoint,
    *,
    approval_id: str,
    status: ApprovalStatus,
    resolved_by: str | None,
    resolution_data: dict[str, Any] | None,
) -> Reply:
    settled = await rp.approvals.resolve(approval_id, status, resolved_by, resolution_data)
    return await _out(rp, settled)


@operation
async def delete_approval(rp: Runpoint, *, approval_id: str) -> Reply:
    await rp.approvals.delete(approval_id)
    return None
