"""A session and what works on it as a whole: its rollback, its checkpoints and their
captures, and the leases and Idempotency-Key claims under which such work goes on."""

from __future__ import annotations

import enum
from typing import Literal

import msgspec

from runpoint.core.run import Run
from runpoint.core.stamps import now
from runpoint.core.tenancy import DEFAULT_TEAM


class Lease(msgspec.Struct, frozen=True):
    """Who carries out a session operation (one owner per operation), until when; renewed
    while it goes. An operation whose lease ran out lost its process: any other may take
    it over."""

    owner: str
    expires_at: float

    def ran_out(self) -> bool:
        return self.expires_at < now()

    def open_to(self, owner: str | None) -> bool:
        """Whether `owner` may act under this lease: it is its own, or it ran out."""
        return owner == self.owner or self.ran_out()


class Rollback(msgspec.Struct, frozen=True):
    """A rollback under way: the checkpoint its session returns to, and its lease."""

    checkpoint_id: str
    lease: Lease


class KeyClaim(msgspec.Struct, frozen=True):
    """A request's claim on an Idempotency-Key (`key` in `scope`, a team's operation): its
    `owner` holds it under a lease, renewed while the request is under way."""

    scope: str
    key: str
    owner: str

    def answered(self, answer: str) -> KeyAnswer:
        return KeyAnswer(self, answer)


class KeyAnswer(msgspec.Struct, frozen=True):
    """What the write that makes a claimed request's run (or session) records on the key:
    its id, `answer`, in the same transaction, so the key is answered if and only if the
    write happened."""

    claim: KeyClaim
    answer: str


class Session(msgspec.Struct, omit_defaults=True):
    session_id: str
    agent_id: str
    team_id: str = DEFAULT_TEAM  # internal: never on the wire
    user_id: str | None = None
    # the name a client gave it (created with one, or renamed); None: it has none
    session_name: str | None = None
    forked_from_session_id: str | None = None
    created_at: float = msgspec.field(default_factory=now)
    updated_at: float = msgspec.field(default_factory=now)
    # the cursor of the session's event log: the seq of its latest event (see SqlStorage)
    event_seq: int = 0
    # why the session refuses work for now: "rollback" under way, or "maintenance"
    locked: str | None = None
    # while `locked` is "rollback": which, and whose (see Sessions.settle_lock)
    rollback: Rollback | None = None


class SessionCheckpointStatus(enum.StrEnum):
    PENDING = "PENDING"
    READY = "READY"
    FAILED = "FAILED"


class SessionCheckpoint(msgspec.Struct, omit_defaults=True):
    """A durable capture of a whole session, bound to its event-log cursor `event_seq`."""

    checkpoint_id: str
    session_id: str
    event_seq: int
    status: SessionCheckpointStatus = SessionCheckpointStatus.PENDING
    kind: Literal["explicit", "auto"] = "explicit"
    label: str | None = None
    size_bytes: int = 0
    error_message: str | None = None
    created_at: float = msgspec.field(default_factory=now)
    # while PENDING: whose capture it is, until when (internal: never on the wire)
    lease: Lease | None = None


class SessionCapture(msgspec.Struct):
    """What a session checkpoint holds: the session's live runs as they were at the cut
    (their transcripts stay where they are: a run's `message_count` is its cut), and the
    state each state-capture plugin added, by the name it registered."""

    session: Session
    runs: list[Run]
    states: dict[str, bytes] = {}
