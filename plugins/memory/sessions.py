"""Sessions, their locks and rollbacks, and session checkpoints."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import msgspec

from runpoint.core.errors import Conflict
from runpoint.core.tenancy import DEFAULT_TEAM
from runpoint.core.types import (
    KeyAnswer,
    Message,
    Rollback,
    Run,
    Session,
    SessionCapture,
    SessionCheckpoint,
    SessionCheckpointStatus,
)
from runpoint.plugins.memory.retention import MemoryRetention
from runpoint.plugins.memory.tables import SessionCheckpointRow, copy


class MemorySessions(MemoryRetention):
    async def create_sessions(
        self,
        sessions: Sequence[Session],
        runs: Sequence[Run] = (),
        incoming: Mapping[str, Sequence[Message]] = {},
        *,
        answering: KeyAnswer | None = None,
    ) -> None:
        ids = [s.session_id for s in sessions]
        with self._answering(answering):
            if len(set(ids)) < len(ids) or any(i in self._sessions for i in ids):
                raise Conflict(f"session {', '.join(ids)} already exists")
            self._refuse_taken_runs(runs)
            self._refuse_removed_sources(runs)
            for session in sessions:
                self._sessions[session.session_id] = copy(session)
                self._session_runs[session.session_id] = []
            self._insert_runs(runs, incoming)

    async def get_session(self, session_id: str) -> Session | None:
        session = self._sessions.get(session_id)
        return None if session is None else copy(session)

    async def list_sessions(self, *, team_id: str, limit: int, offset: int) -> list[Session]:
        team = [s for s in self._sessions.values() if s.team_id == team_id]
        team.sort(key=lambda s: (-s.created_at, s.session_id))
        return [copy(s) for s in team[offset : offset + limit]]

    async def first_inputs(self, session_ids: Sequence[str]) -> dict[str, str | None]:
        firsts = {sid: self._live_runs(sid)[:1] for sid in session_ids}
        return {sid: runs[0].input for sid, runs in firsts.items() if runs}

    async def rename_session(self, session_id: str, name: str | None) -> bool:
        session = self._sessions.get(session_id)
        if session is None:
            return False
        session.session_name = name
        return True

    async def delete_sessions(self, session_ids: Sequence[str]) -> bool:
        doomed = set(session_ids)
        if not doomed <= self._sessions.keys():
            return False
        for session_id in doomed:
            self._refuse_in_flight(session_id)
        # forks elsewhere keep what they read of these runs (copy-on-write)
        run_ids = {i for s in doomed for i in self._session_runs[s]}
        captured = {
            i for i, row in self._session_checkpoints.items() if row.checkpoint.session_id in doomed
        }
        self._erase(run_ids | captured, run_ids)
        self._delete_sessions(doomed)
        return True

    async def lock_session(
        self, session_id: str, reason: str, rollback: Rollback | None = None
    ) -> bool:
        session = self._sessions.get(session_id)
        if session is None:
            return False
        self._refuse_locked(session)
        self._refuse_in_flight(session_id)
        session.locked, session.rollback = reason, rollback
        return True

    async def unlock_session(self, session_id: str, rollback_owner: str | None = None) -> bool:
        session = self._sessions.get(session_id)
        if session is None:
            return False
        if rollback_owner is not None and self._rollback(session, rollback_owner) is None:
            return False
        session.locked, session.rollback = None, None
        return True

    async def hold_rollback(self, session_id: str, rollback: Rollback) -> bool:
        session = self._sessions.get(session_id)
        held = None if session is None else self._rollback(session, rollback.lease.owner)
        if session is None or held is None or held.checkpoint_id != rollback.checkpoint_id:
            return False
        session.rollback = rollback
        return True

    async def rollback_session(self, session_id: str, runs: Sequence[Run], owner: str) -> bool:
        session = self._sessions.get(session_id)
        if session is None or self._rollback(session, owner) is None:
            return False
        self._refuse_taken_runs(runs)
        for run_id in self._session_runs[session_id]:
            hidden = self._runs[run_id]
            hidden.hide()
            self._runs[run_id] = hidden
        self._insert_runs(runs, {})
        session.locked, session.rollback = None, None
        session.event_seq += 1  # the rollback is an event of the session too
        return True

    @staticmethod
    def _rollback(session: Session, owner: str) -> Rollback | None:
        """The session's rollback under way if its lease is `owner`'s or ran out."""
        rollback = session.rollback
        if session.locked != "rollback" or rollback is None:
            return None
        return rollback if rollback.lease.open_to(owner) else None

    async def add_session_checkpoint(self, checkpoint: SessionCheckpoint) -> None:
        if checkpoint.checkpoint_id in self._session_checkpoints:
            raise Conflict(f"session checkpoint {checkpoint.checkpoint_id} already exists")
        row = SessionCheckpointRow(next(self._seq), copy(checkpoint))
        self._session_checkpoints[checkpoint.checkpoint_id] = row

    async def update_session_checkpoint(
        self, checkpoint: SessionCheckpoint, capture: bytes | None, owner: str | None
    ) -> bool:
        row = self._session_checkpoints.get(checkpoint.checkpoint_id)
        if row is None or row.checkpoint.status is not SessionCheckpointStatus.PENDING:
            return False
        lease = row.checkpoint.lease
        if lease is not None and not lease.open_to(owner):
            return False
        if capture is not None:
            session = self._sessions.get(checkpoint.session_id)
            team = DEFAULT_TEAM if session is None else session.team_id
            binding = ("session_checkpoints", "capture", checkpoint.checkpoint_id)
            capture = self.codec.seal(capture, *binding, team=team)
        row.checkpoint, row.capture = copy(checkpoint), capture
        return True

    async def get_session_checkpoint(self, checkpoint_id: str) -> SessionCheckpoint | None:
        row = self._session_checkpoints.get(checkpoint_id)
        return None if row is None else copy(row.checkpoint)

    async def session_capture(self, checkpoint_id: str) -> SessionCapture | None:
        row = self._session_checkpoints.get(checkpoint_id)
        if row is None or row.capture is None:
            return None
        capture = self.codec.open(row.capture, "session_checkpoints", "capture", checkpoint_id)
        return msgspec.json.decode(capture, type=SessionCapture)

    async def list_session_checkpoints(
        self, session_id: str, *, limit: int, before: int | None
    ) -> list[tuple[int, SessionCheckpoint]]:
        rows = (
            row
            for row in reversed(self._session_checkpoints.values())  # newest first
            if row.checkpoint.session_id == session_id and (before is None or row.seq < before)
        )
        return [(row.seq, copy(row.checkpoint)) for row in itertools.islice(rows, limit)]

    async def delete_session_checkpoint(self, checkpoint_id: str) -> None:
        if checkpoint_id in self._session_checkpoints:
            self._erase({checkpoint_id}, set())
