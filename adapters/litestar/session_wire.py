"""The session dialect's JSON shapes (seed 003; see openapi.yaml's /v2/ paths): RFC 3339
timestamps, opaque cursors (event ids, page tokens: see `cursors`), and no internal field
(team, storage ids, the raw sequence number of the event log) ever serialised."""

from __future__ import annotations

import datetime

import msgspec

from runpoint.core.types import Session, SessionCheckpoint

from .catalog_wire import ForkedSession
from .cursors import Cursors
from .errors import HttpError


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


class SessionWire:
    """The session dialect's answers, with the cursors (event ids, page tokens) in the
    opaque form `Cursors` gives them."""

    def __init__(self, cursors: Cursors) -> None:
        self.cursors = cursors

    def checkpoint(self, c: SessionCheckpoint) -> SessionCheckpointOut:
        return SessionCheckpointOut(
            checkpoint_id=c.checkpoint_id,
            session_id=c.session_id,
            status=c.status.value,
            kind=c.kind,
            label=c.label,
            event_id=self.cursors.seal("event", c.session_id, c.event_seq),
            size_bytes=c.size_bytes,
            created_at=timestamp(c.created_at),
            error_message=c.error_message,
        )

    def envelope(self, c: SessionCheckpoint) -> SessionCheckpointEnvelope:
        return SessionCheckpointEnvelope(self.checkpoint(c))

    def page_position(self, session_id: str, page_token: str | None) -> int | None:
        """Where the page a token we gave for this session starts (None: at the first)."""
        if page_token is None:
            return None
        position = self.cursors.open("page", session_id, page_token)
        if position is None:
            raise HttpError(
                400,
                "BAD_REQUEST",
                f"page_token {page_token!r} is not one we gave for session {session_id}",
            )
        return position

    def page(
        self, session_id: str, checkpoints: list[SessionCheckpoint], next_position: int | None
    ) -> SessionCheckpointPage:
        """A page of checkpoints, and the token of the next page (if there is one)."""
        next_token = (
            None if next_position is None else self.cursors.seal("page", session_id, next_position)
        )
        return SessionCheckpointPage([self.checkpoint(c) for c in checkpoints], next_token)

    def forks(self, c: SessionCheckpoint, sessions: list[Session]) -> SessionForks:
        return SessionForks(
            self.checkpoint(c), [ForkedSession(s.session_id, c.session_id) for s in sessions]
        )


def timestamp(epoch: float) -> str:
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
