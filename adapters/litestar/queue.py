"""AgentOS's job queue (`/queue`): a team's runs as jobs, and requeueing a failed one (see
runpoint.runs.jobs)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from runpoint.core.types import Run, RunStatus
from runpoint.facade import Runpoint

from .catalog_wire import PageInfo
from .handlers import Reply, operation

JobStatus = Literal["queued", "running", "paused", "completed", "failed", "cancelled"]
STATUSES: dict[RunStatus, JobStatus] = {
    RunStatus.PENDING: "queued",
    RunStatus.RUNNING: "running",
    RunStatus.PAUSED: "paused",
    RunStatus.COMPLETED: "completed",
    RunStatus.REGENERATED: "completed",  # it completed; another run answers in its place
    RunStatus.ERROR: "failed",
    RunStatus.CANCELLED: "cancelled",
}
ENDED = frozenset({"completed", "failed", "cancelled"})


class Job(msgspec.Struct):
    id: str
    component_id: str
    session_id: str
    user_id: str | None
    payload: dict[str, Any]
    status: JobStatus
    attempt: int
    max_attempts: int
    locked_by: str | None
    error: str | None
    created_at: int
    updated_at: int
    completed_at: int | None
    component_type: Literal["agent"] = "agent"
    job_type: Literal["run"] = "run"
    idempotency_key: None = None
    available_at: None = None
    locked_at: None = None


class JobPage(msgspec.Struct):
    data: list[Job]
    meta: PageInfo


def job(rp: Runpoint, run: Run) -> Job:
    status = STATUSES[run.status]
    return Job(
        id=run.run_id,
        component_id=run.agent_id,
        session_id=run.session_id,
        user_id=run.user_id,
        payload={"input": run.input},
        status=status,
        # executions started: none while it waits, then one and one per recovery
        attempt=0 if run.status is RunStatus.PENDING else run.recoveries + 1,
        max_attempts=rp.leases.max_recoveries + 1,
        locked_by=run.lease_owner,
        error=run.error,
        created_at=int(run.created_at),
        updated_at=int(run.updated_at),
        completed_at=int(run.updated_at) if status in ENDED else None,
    )


@operation
async def list_queue_jobs(
    rp: Runpoint, *, status: JobStatus | None, limit: int, page: int
) -> Reply:
    wanted = [s for s, named in STATUSES.items() if status is None or named == status]
    runs, total = await rp.jobs.list(wanted, limit=limit, offset=(page - 1) * limit)
    return JobPage([job(rp, r) for r in runs], PageInfo.of(page, limit, total))


@operation
async def get_queue_job(rp: Runpoint, *, job_id: str) -> Reply:
    return job(rp, await rp.queries.run(job_id))


@operation
async def requeue_queue_job(rp: Runpoint, *, job_id: str, idempotency_key: str | None) -> Reply:
    handle = await rp.jobs.requeue(job_id, idempotency_key=idempotency_key)
    return job(rp, handle.run)


class QueueStats(msgspec.Struct):
    queued: int = 0
    running: int = 0
    paused: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0
    total: int = 0


@operation
async def get_queue_stats(rp: Runpoint) -> Reply:
    stats = QueueStats()
    for status, n in (await rp.jobs.stats()).items():
        named = STATUSES[status]
        setattr(stats, named, getattr(stats, named) + n)
        stats.total += n
    return stats
