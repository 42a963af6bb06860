"""The session dialect's JSON shapes (seed 003; see openapi.yaml's /v2/ paths): RFC 3339
timestamps, opaque event ids, and no internal field (team, storage ids, the raw sequence
number of the event log) ever serialised."""

from __future__ import annotations

import datetime

import msgspec

from runpoint.types import Session, SessionCheckpoint

from .errors import HttpError
from .wire import ForkedSession


class SessionCheckpointOut(msgspec.Struct):
    checkpoint_id: str
    session_id: str
    status: str
    kind: str
    label: str | None
    event_id: str
    size_bytes: int
    created_at: str
    error_message: str | None


class SessionCheckpointEnvelope(msgspec.Struct):
    checkpoint: SessionCheckpointOut


class SessionCheckpointPage(msgspec.Struct):
    checkpoints: list[SessionCheckpointOut]
    next_page_token: str | None


class SessionForks(msgspec.Struct):
    checkpoint: SessionCheckpointOut
    sessions: list[ForkedSession]


def event_id(event_seq: int) -> str:
    """A cursor of a session's event log as the client sees it: opaque, and sortable as
    text in the order of the log."""
    return f"{event_seq:016x}"


def checkpoint(c: SessionCheckpoint) -> SessionCheckpointOut:
    return SessionCheckpointOut(
        checkpoint_id=c.checkpoint_id,
        session_id=c.session_id,
        status=c.status.value,
        kind=c.kind,
        label=c.label,
        event_id=event_id(c.event_seq),
        size_bytes=c.size_bytes,
        created_at=timestamp(c.created_at),
        error_message=c.error_message,
    )


def envelope(c: SessionCheckpoint) -> SessionCheckpointEnvelope:
    return SessionCheckpointEnvelope(checkpoint(c))


def page_position(page_token: str | None) -> int | None:
    """Where the page a token we gave starts (None: at the first page)."""
    if page_token is None:
        return None
    try:
        return int(page_token, 16)
    except ValueError:
        raise HttpError(
            400, "BAD_REQUEST", f"page_token {page_token!r} is not one we gave"
        ) from None


def page(checkpoints: list[SessionCheckpoint], next_position: int | None) -> SessionCheckpointPage:
    """A page of checkpoints, and the token of the next page (if there is one)."""
    next_token = None if next_position is None else f"{next_position:x}"
    return SessionCheckpointPage([checkpoint(c) for c in checkpoints], next_token)


def forks(c: SessionCheckpoint, sessions: list[Session]) -> SessionForks:
    return SessionForks(
        checkpoint(c), [ForkedSession(s.session_id, c.session_id) for s in sessions]
    )


def timestamp(epoch: float) -> str:
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
