"""The session dialect (/v2/): a session's checkpoints, made, listed, read, deleted,
rolled back to and forked from (see openapi.yaml)."""

from __future__ import annotations

from litestar import Response

from runpoint.facade import Runpoint

from . import wire
from .cursors import Cursors
from .handlers import Reply, operation
from .session_wire import SessionWire


async def _session_wire(rp: Runpoint) -> SessionWire:
    return SessionWire(Cursors(await rp.secret("cursors")))


@operation
async def create_session_checkpoint(rp: Runpoint, *, session_id: str, label: str | None) -> Reply:
    created = await rp.session_checkpoints.create(session_id, label=label)
    body = (await _session_wire(rp)).envelope(created)
    return Response(wire.encode(body), status_code=201, media_type="application/json")


@operation
async def list_session_checkpoints(
    rp: Runpoint, *, session_id: str, page_size: int, page_token: str | None
) -> Reply:
    answer = await _session_wire(rp)
    found, next_position = await rp.session_checkpoints.page(
        session_id, page_size=page_size, before=answer.page_position(session_id, page_token)
    )
    return answer.page(session_id, found, next_position)


@operation
async def get_session_checkpoint(rp: Runpoint, *, session_id: str, checkpoint_id: str) -> Reply:
    checkpoint = await rp.session_checkpoints.get(session_id, checkpoint_id)
    return (await _session_wire(rp)).envelope(checkpoint)


@operation
async def delete_session_checkpoint(rp: Runpoint, *, session_id: str, checkpoint_id: str) -> Reply:
    await rp.session_checkpoints.delete(session_id, checkpoint_id)
    return None


@operation
async def rollback_session_checkpoint(
    rp: Runpoint, *, session_id: str, checkpoint_id: str
) -> Reply:
    checkpoint = await rp.session_checkpoints.rollback(session_id, checkpoint_id)
    return (await _session_wire(rp)).envelope(checkpoint)


@operation
async def fork_session_at_checkpoint(
    rp: Runpoint, *, session_id: str, from_checkpoint_id: str | None, count: int
) -> Reply:
    checkpoint, sessions = await rp.session_checkpoints.fork(
        session_id, from_checkpoint_id=from_checkpoint_id, count=count
    )
    return (await _session_wire(rp)).forks(checkpoint, sessions)
