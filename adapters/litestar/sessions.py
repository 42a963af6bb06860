"""AgentOS's session operations (the run dialect's `/sessions`): list, create, get,
rename, update and delete sessions, and read a session's runs."""

from __future__ import annotations

from litestar import Response

from runpoint.core.types import Session
from runpoint.facade import Runpoint

from . import catalog_wire, wire
from .errors import HttpError
from .handlers import Reply, agent_name, operation


@operation
async def list_sessions(rp: Runpoint, *, limit: int, page: int) -> Reply:
    sessions = await rp.list_sessions(limit=limit, offset=(page - 1) * limit)
    names = await rp.session_names(sessions)
    return catalog_wire.SessionPage(
        [catalog_wire.session(s, names[s.session_id]) for s in sessions],
        catalog_wire.PageMeta(page, limit),
    )


@operation
async def create_session(
    rp: Runpoint,
    *,
    type: str,
    agent_id: str,
    session_id: str | None,
    session_name: str | None,
    user_id: str | None,
    session_state: None,
    metadata: None,
    team_id: None,
    workflow_id: None,
) -> Reply:
    # `type` and the nulls are AgentOS's: the document allows nothing else, so nothing is lost
    session = await rp.create_session(
        agent_id, session_id=session_id, user_id=user_id, session_name=session_name
    )
    body = wire.encode(await _named(rp, session))
    return Response(body, status_code=201, media_type="application/json")


@operation
async def get_session(rp: Runpoint, *, session_id: str) -> Reply:
    return await _named(rp, await rp.get_session(session_id))


@operation
async def rename_session(rp: Runpoint, *, session_id: str, session_name: str) -> Reply:
    return await _named(rp, await rp.rename_session(session_id, session_name))


@operation
async def update_session(
    rp: Runpoint,
    *,
    session_id: str,
    session_name: str | None,
    session_state: None,
    metadata: None,
    summary: None,
) -> Reply:
    if session_name is None:  # nothing that runpoint keeps changes
        return await get_session(rp, session_id=session_id)
    return await rename_session(rp, session_id=session_id, session_name=session_name)


async def _named(rp: Runpoint, session: Session) -> catalog_wire.SessionOut:
    """The session as one is answered on its own: named, if it has no name, by its first
    input, as AgentOS names it ("" before any run)."""
    names = await rp.session_names([session])
    return catalog_wire.session(session, names[session.session_id])


@operation
async def delete_session(rp: Runpoint, *, session_id: str) -> Reply:
    await rp.delete_session(session_id)
    return None


@operation
async def delete_sessions(
    rp: Runpoint, *, session_ids: list[str], session_types: list[str]
) -> Reply:
    if len(session_ids) != len(session_types):
        raise HttpError(400, "BAD_REQUEST", "session_ids and session_types differ in length")
    await rp.delete_sessions(session_ids)
    return None


@operation
async def get_session_run_previews(rp: Runpoint, *, session_id: str) -> Reply:
    return [catalog_wire.run_preview(r) for r in await rp.list_runs(session_id)]


@operation
async def get_session_runs(rp: Runpoint, *, session_id: str) -> Reply:
    details = await rp.views.list_run_details(session_id)
    return [wire.run_detail(d, agent_name(rp, d.run.agent_id)) for d in details]


@operation
async def get_session_run(rp: Runpoint, *, session_id: str, run_id: str) -> Reply:
    detail = await rp.views.get_run(run_id, session_id=session_id)
    return wire.run_detail(detail, agent_name(rp, detail.run.agent_id))
