"""AgentOS's schedule operations (`/schedules`): make, read, change, enable, disable,
trigger and delete a team's schedules, and read the runs they fired. A schedule targets
the one endpoint runpoint schedules, `POST /agents/{agent_id}/runs`, with `payload` as
its body."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from litestar import Response

from runpoint.core.errors import InvalidArguments
from runpoint.core.schedule import Schedule, ScheduleRun
from runpoint.core.types import IN_FLIGHT, RunStatus, new_id
from runpoint.facade import Runpoint

from . import catalog_wire, wire
from .handlers import Reply, operation

_PREFIX, _SUFFIX = "/agents/", "/runs"
_NOT_FIELDS = ("rp", "schedule_id", "sent")
# what a PATCH's null sets a field to: on demand, the default zone, no description
_CLEARED: dict[str, Any] = {"cron_expr": "", "timezone": "UTC", "description": None}


class Target(msgspec.Struct, omit_defaults=True):
    message: str
    session_id: str | None = None
    user_id: str | None = None
    model: str | None = None


class ScheduleOut(msgspec.Struct):
    id: str
    name: str
    description: str | None
    method: str
    endpoint: str
    payload: Target
    cron_expr: str
    timezone: str
    timeout_seconds: int
    max_retries: int
    retry_delay_seconds: int
    enabled: bool
    next_run_at: int | None
    created_at: int
    updated_at: int
    agent_id: str
    missed_ticks: str


class SchedulePage(msgspec.Struct):
    data: list[ScheduleOut]
    meta: catalog_wire.PageMeta


class ScheduleRunOut(msgspec.Struct):
    id: str
    schedule_id: str
    attempt: int
    triggered_at: int
    completed_at: int | None
    status: RunStatus
    status_code: None
    run_id: str
    session_id: str
    error: str | None
    created_at: int
    trigger: Literal["cron", "manual"]


class ScheduleRunPage(msgspec.Struct):
    data: list[ScheduleRunOut]
    meta: catalog_wire.PageMeta


def schedule_out(s: Schedule) -> ScheduleOut:
    return ScheduleOut(
        id=s.schedule_id,
        name=s.name,
        description=s.description,
        method="POST",
        endpoint=f"{_PREFIX}{s.agent_id}{_SUFFIX}",
        payload=Target(s.message, s.session_id, s.user_id, s.model),
        cron_expr=s.cron_expr,
        timezone=s.timezone,
        timeout_seconds=s.timeout_seconds,
        max_retries=s.max_retries,
        retry_delay_seconds=s.retry_delay_seconds,
        enabled=s.enabled,
        next_run_at=None if s.next_run_at is None else int(s.next_run_at),
        created_at=int(s.created_at),
        updated_at=int(s.updated_at),
        agent_id=s.agent_id,
        missed_ticks=s.missed,
    )


async def fired_out(rp: Runpoint, fired: ScheduleRun) -> ScheduleRunOut:
    run = await rp.storage.get_run(fired.run_id)
    status = RunStatus.CANCELLED if run is None else run.status  # removed since: gone
    ended = run is not None and run.status not in IN_FLIGHT
    return ScheduleRunOut(
        id=fired.run_id,
        schedule_id=fired.schedule_id,
        attempt=fired.attempt,
        triggered_at=int(fired.tick),
        completed_at=int(run.updated_at) if run is not None and ended else None,
        status=status,
        status_code=None,
        run_id=fired.run_id,
        session_id=fired.session_id,
        error=None if run is None else run.error,
        created_at=int(fired.fired_at),
        trigger=fired.trigger,
    )


def _agent_of(endpoint: str) -> str:
    agent_id = endpoint.removeprefix(_PREFIX).removesuffix(_SUFFIX)
    if endpoint != f"{_PREFIX}{agent_id}{_SUFFIX}" or not agent_id or "/" in agent_id:
        raise InvalidArguments(f"endpoint: {endpoint!r} is not /agents/{{agent_id}}/runs")
    return agent_id


def _fields(given: dict[str, Any], sent: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The Schedule fields of a handler's arguments: those of the request given (a None
    one was absent, or a null that, if `sent`, clears the field or is refused)."""
    fields = {}
    for name, value in given.items():
        if name in _NOT_FIELDS or (value is None and name not in sent):
            continue
        if value is None and name not in _CLEARED:
            raise InvalidArguments(f"{name}: cannot be cleared (null); leave it out to keep it")
        fields[name] = _CLEARED[name] if value is None else value
    fields.pop("method", None)  # POST, the one the document allows
    if (endpoint := fields.pop("endpoint", None)) is not None:
        fields["agent_id"] = _agent_of(endpoint)
    if (payload := fields.pop("payload", None)) is not None:
        target = msgspec.convert(payload, Target)  # validated against the document already
        if not target.message.strip():
            raise InvalidArguments("payload.message: must not be blank")
        fields |= {f: getattr(target, f) for f in Target.__struct_fields__}  # all of it
    if (missed := fields.pop("missed_ticks", None)) is not None:
        fields["missed"] = missed
    return fields


@operation
async def list_schedules(rp: Runpoint, *, limit: int, page: int) -> Reply:
    found = await rp.schedules.page(limit=limit, offset=(page - 1) * limit)
    return SchedulePage([schedule_out(s) for s in found], catalog_wire.PageMeta(page, limit))


@operation
async def create_schedule(
    rp: Runpoint,
    *,
    name: Any,
    cron_expr: Any,
    endpoint: Any,
    method: Any,
    description: Any,
    payload: Any,
    timezone: Any,
    timeout_seconds: Any,
    max_retries: Any,
    retry_delay_seconds: Any,
    missed_ticks: Any,
) -> Reply:
    fields = _fields(locals())
    made = await rp.schedules.create(Schedule(schedule_id=new_id(), **fields))
    body = wire.encode(schedule_out(made))
    return Response(body, status_code=201, media_type="application/json")


@operation
async def get_schedule(rp: Runpoint, *, schedule_id: str) -> Reply:
    return schedule_out(await rp.schedules.get(schedule_id))


@operation
async def update_schedule(
    rp: Runpoint,
    *,
    schedule_id: str,
    sent: frozenset[str],
    name: Any,
    cron_expr: Any,
    endpoint: Any,
    method: Any,
    description: Any,
    payload: Any,
    timezone: Any,
    timeout_seconds: Any,
    max_retries: Any,
    retry_delay_seconds: Any,
    missed_ticks: Any,
) -> Reply:
    fields = _fields(locals(), sent)
    return schedule_out(await rp.schedules.update(schedule_id, fields))


@operation
async def delete_schedule(rp: Runpoint, *, schedule_id: str) -> Reply:
    await rp.schedules.delete(schedule_id)
    return None


@operation
async def enable_schedule(rp: Runpoint, *, schedule_id: str) -> Reply:
    return schedule_out(await rp.schedules.update(schedule_id, {"enabled": True}))


@operation
async def disable_schedule(rp: Runpoint, *, schedule_id: str) -> Reply:
    return schedule_out(await rp.schedules.update(schedule_id, {"enabled": False}))


@operation
async def trigger_schedule(rp: Runpoint, *, schedule_id: str, idempotency_key: str | None) -> Reply:
    return await fired_out(rp, await rp.schedules.trigger(schedule_id, idempotency_key))


@operation
async def list_schedule_runs(rp: Runpoint, *, schedule_id: str, limit: int, page: int) -> Reply:
    fired = await rp.schedules.runs(schedule_id, limit=limit, offset=(page - 1) * limit)
    data = [await fired_out(rp, f) for f in fired]
    return ScheduleRunPage(data, catalog_wire.PageMeta(page, limit))


@operation
async def get_schedule_run(rp: Runpoint, *, schedule_id: str, run_id: str) -> Reply:
    return await fired_out(rp, await rp.schedules.run(schedule_id, run_id))
