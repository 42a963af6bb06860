"""AgentOS's session operations (the run dialect's `/sessions`): list, create, get,
rename, update and delete sessions, and read a session's runs."""

from __future__ import annotations

from litestar import Response

from runpoint.core.types import Session
from runpoint.facade import Runpoint

from . import wire
from .errors import HttpError
from .handlers import Handler, Reply, agent_name


async def list_sessions(rp: Runpoint, *, limit: int, page: int) -> Reply:
    sessions = await rp.list_sessions(limit=limit, offset=(page - 1) * limit)
    return wire.SessionPage([wire.session(s) for s in sessions], wire.PageMeta(page, limit))


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


async def get_session(rp: Runpoint, *, session_id: str) -> Reply:
    return await _named(rp, await rp.get_session(session_id))


async def rename_session(rp: Runpoint, *, session_id: str, session_name: str) -> Reply:
    return await _named(rp, await rp.rename_session(session_id, session_name))


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


async def _named(rp: Runpoint, session: Session) -> wire.SessionOut:
    """The session as one is answered on its own: named, if it has no name, by its first
    input, as AgentOS names it ("" before any run)."""
    if session.session_name is not None:
        return wire.session(session)
    runs = await rp.list_runs(session.session_id)
    return wire.session(session, (runs[0].input or "") if runs else "")


async def delete_session(rp: Runpoint, *, session_id: str) -> Reply:
    await rp.delete_session(session_id)
    return None


async def delete_sessions(
    rp: Runpoint, *, session_ids: list[str], session_types: list[str]
) -> Reply:
    if len(session_ids) != len(session_types):
        raise HttpError(400, "BAD_REQUEST", "session_ids and session_types differ in length")
    await rp.delete_sessions(session_ids)
    return None


async def get_session_run_previews(rp: Runpoint, *, session_id: str) -> Reply:
    return [wire.run_preview(r) for r in await rp.list_runs(session_id)]


async def get_session_runs(rp: Runpoint, *, session_id: str) -> Reply:
    details = await rp.views.list_run_details(session_id)
    return [wire.run_detail(d, agent_name(rp, d.run.agent_id)) for d in details]


async def get_session_run(rp: Runpoint, *, session_id: str, run_id: str) -> Reply:
    detail = await rp.views.get_run(run_id, session_id=session_id)
    return wire.run_detail(detail, agent_name(rp, detail.run.agent_id))


HANDLERS: dict[str, Handler] = {
    h.__name__: h
    for h in (
        list_sessions,
        create_session,
        get_session,
        rename_session,
        update_session,
        delete_session,
        delete_sessions,
        get_session_run_previews,
        get_session_runs,
        get_session_run,
    )
}
