"""`Storage` in this process's memory (``--db memory:``): the reference backend, for tests
and demos. It forgets everything when the process ends, and two processes (or two
`MemoryStorage` objects) never share it.

Every method runs to completion without awaiting anything, so under asyncio each one is
atomic: no lock is needed. Structs are copied in and out, as a database would, so a
caller changing a `Run` it read or wrote does not change what is stored.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from runpoint import hookimpl
from runpoint.errors import Conflict, Locked
from runpoint.storage import StorageFactory
from runpoint.types import (
    Checkpoint,
    Message,
    Role,
    Rollback,
    Run,
    RunStatus,
    Segment,
    Session,
    SessionCapture,
    SessionCheckpoint,
    SessionCheckpointStatus,
)

T = TypeVar("T", bound=msgspec.Struct)
_IN_FLIGHT = (RunStatus.PENDING, RunStatus.RUNNING)
_encode = msgspec.msgpack.Encoder().encode
_decoders: dict[type[Any], msgspec.msgpack.Decoder[Any]] = {}


def _copy(struct: T) -> T:
    """A deep copy (a msgpack round trip: faster than `copy.deepcopy`, and exact)."""
    kind = type(struct)
    decoder = _decoders.get(kind) or _decoders.setdefault(kind, msgspec.msgpack.Decoder(kind))
    copied: T = decoder.decode(_encode(struct))
    return copied


class _SessionCheckpointRow(msgspec.Struct):
    seq: int  # its position: creation order across the store
    checkpoint: SessionCheckpoint
    capture: bytes | None = None


class MemoryStorage:
    def __init__(self, url: str = "memory:") -> None:
        self.url = url
        self._sessions: dict[str, Session] = {}
        self._runs: dict[str, Run] = {}
        # a session's run ids in the order they were inserted (its newest run is last)
        self._session_runs: dict[str, list[str]] = {}
        # a run's own messages and checkpoints, by index
        self._messages: dict[str, dict[int, Message]] = {}
        self._checkpoints: dict[str, dict[int, Checkpoint]] = {}
        self._tool_calls: dict[tuple[str, str], Message | None] = {}
        self._keys: dict[tuple[str, str], tuple[str, str | None]] = {}
        self._session_checkpoints: dict[str, _SessionCheckpointRow] = {}
        self._seq = itertools.count(1)

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    # -- sessions ------------------------------------------------------------------

    async def create_sessions(
        self,
        sessions: Sequence[Session],
        runs: Sequence[Run] = (),
        incoming: Mapping[str, Sequence[Message]] = {},
    ) -> None:
        ids = [s.session_id for s in sessions]
        if len(set(ids)) < len(ids) or any(i in self._sessions for i in ids):
            raise Conflict(f"session {', '.join(ids)} already exists")
        self._refuse_taken_runs(runs)
        for session in sessions:
            self._sessions[session.session_id] = _copy(session)
            self._session_runs[session.session_id] = []
        self._insert_runs(runs, incoming)

    async def get_session(self, session_id: str) -> Session | None:
        session = self._sessions.get(session_id)
        return None if session is None else _copy(session)

    async def list_sessions(self, *, team_id: str, limit: int, offset: int) -> list[Session]:
        team = [s for s in self._sessions.values() if s.team_id == team_id]
        team.sort(key=lambda s: (-s.created_at, s.session_id))
        return [_copy(s) for s in team[offset : offset + limit]]

    async def delete_session(self, session_id: str) -> bool:
        forks = [
            s.session_id for s in self._sessions.values() if s.forked_from_session_id == session_id
        ]
        if forks:
            # their runs read this session's messages (copy-on-write)
            raise Conflict(
                f"session {session_id} has forks that share its history: "
                f"{', '.join(forks)}; delete them first"
            )
        if session_id not in self._sessions:
            return False
        self._refuse_in_flight(session_id)
        for run_id in self._session_runs.pop(session_id):
            del self._runs[run_id]
            self._messages.pop(run_id, None)
            self._checkpoints.pop(run_id, None)
        self._tool_calls = {k: v for k, v in self._tool_calls.items() if k[0] in self._runs}
        self._session_checkpoints = {
            i: row
            for i, row in self._session_checkpoints.items()
            if row.checkpoint.session_id != session_id
        }
        del self._sessions[session_id]
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
            self._runs[run_id].hidden = True
        self._insert_runs(runs, {})
        session.locked, session.rollback = None, None
        session.event_seq += 1  # the rollback is an event of the session too
        return True

    # -- session checkpoints ---------------------------------------------------------

    async def add_session_checkpoint(self, checkpoint: SessionCheckpoint) -> None:
        if checkpoint.checkpoint_id in self._session_checkpoints:
            raise Conflict(f"session checkpoint {checkpoint.checkpoint_id} already exists")
        row = _SessionCheckpointRow(next(self._seq), _copy(checkpoint))
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
        row.checkpoint, row.capture = _copy(checkpoint), capture
        return True

    async def get_session_checkpoint(self, checkpoint_id: str) -> SessionCheckpoint | None:
        row = self._session_checkpoints.get(checkpoint_id)
        return None if row is None else _copy(row.checkpoint)

    async def session_capture(self, checkpoint_id: str) -> SessionCapture | None:
        row = self._session_checkpoints.get(checkpoint_id)
        if row is None or row.capture is None:
            return None
        return msgspec.json.decode(row.capture, type=SessionCapture)

    async def list_session_checkpoints(
        self, session_id: str, *, limit: int, before: int | None
    ) -> list[tuple[int, SessionCheckpoint]]:
        rows = (
            row
            for row in reversed(self._session_checkpoints.values())  # newest first
            if row.checkpoint.session_id == session_id and (before is None or row.seq < before)
        )
        return [(row.seq, _copy(row.checkpoint)) for row in itertools.islice(rows, limit)]

    async def delete_session_checkpoint(self, checkpoint_id: str) -> None:
        self._session_checkpoints.pop(checkpoint_id, None)

    # -- runs ------------------------------------------------------------------------

    async def create_runs(
        self, runs: Sequence[Run], incoming: Mapping[str, Sequence[Message]] = {}
    ) -> None:
        for session_id in {r.session_id for r in runs}:
            if session := self._sessions.get(session_id):
                self._refuse_locked(session)
        self._refuse_taken_runs(runs)
        self._insert_runs(runs, incoming)

    async def start_in_session(self, run: Run, incoming: Sequence[Message] = ()) -> Run:
        if session := self._sessions.get(run.session_id):
            self._refuse_locked(session)
        self._refuse_in_flight(run.session_id)
        self._refuse_taken_runs([run])
        live = self._live_runs(run.session_id)
        run = msgspec.structs.replace(run, previous_run_id=live[-1].run_id if live else None)
        self._insert_runs([run], {run.run_id: incoming})
        return run

    async def get_run(self, run_id: str) -> Run | None:
        run = self._runs.get(run_id)
        return None if run is None else _copy(run)

    async def list_runs(self, session_id: str) -> list[Run]:
        return [_copy(r) for r in self._live_runs(session_id)]

    async def save(
        self,
        run: Run,
        messages: Sequence[Message],
        checkpoint: Checkpoint | None,
        *,
        intents: Sequence[str] = (),
    ) -> None:
        self._save(run, messages, checkpoint, intents)

    def _save(
        self,
        run: Run,
        messages: Sequence[Message],
        checkpoint: Checkpoint | None = None,
        intents: Sequence[str] = (),
    ) -> None:
        stored = self._runs.get(run.run_id)
        session = self._sessions.get(run.session_id)
        if stored is None or session is None or stored.revision != run.revision:
            raise Conflict(f"run {run.run_id} was changed by another writer")
        # one place in the session's event log per message, then one for the boundary
        session.event_seq += len(messages) + 1
        first = run.message_count - len(messages)
        rows = self._messages.setdefault(run.run_id, {})
        rows.update((first + i, _copy(m)) for i, m in enumerate(messages))
        if checkpoint is not None:
            marks = self._checkpoints.setdefault(run.run_id, {})
            marks[checkpoint.message_index] = msgspec.structs.replace(
                _copy(checkpoint), event_seq=session.event_seq
            )
        for call_id in intents:
            self._tool_calls.setdefault((run.run_id, call_id), None)
        # the store owns these: a writer reads them back, never writes them
        self._runs[run.run_id] = msgspec.structs.replace(
            _copy(run),
            revision=run.revision + 1,
            hidden=stored.hidden,
            cancel_requested=stored.cancel_requested,
        )
        run.revision += 1
        run.cancel_requested = stored.cancel_requested

    async def record_tool_result(self, run_id: str, result: Message) -> None:
        call = (run_id, result.tool_call_id or "")
        if call in self._tool_calls:
            self._tool_calls[call] = _copy(result)

    async def tool_records(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> dict[str, Message | None]:
        records = {}
        for call_id in tool_call_ids:
            if (run_id, call_id) in self._tool_calls:
                result = self._tool_calls[run_id, call_id]
                records[call_id] = None if result is None else _copy(result)
        return records

    async def request_cancel(self, run_id: str) -> bool:
        run = self._runs.get(run_id)
        if run is None or run.status not in _IN_FLIGHT:
            return False
        run.cancel_requested = True
        return True

    async def renew_leases(self, owner: str, run_ids: Collection[str], until: float) -> None:
        for run_id in run_ids:
            run = self._runs.get(run_id)
            if run is not None and run.lease_owner == owner and run.status in _IN_FLIGHT:
                run.lease_expires_at = until

    async def expired_runs(self, before: float, agent_ids: Collection[str]) -> list[Run]:
        return [
            _copy(r)
            for r in self._runs.values()
            if r.status in _IN_FLIGHT
            and r.agent_id in agent_ids
            and (r.lease_expires_at is None or r.lease_expires_at < before)
        ]

    # -- idempotency keys ------------------------------------------------------------

    async def claim_key(
        self, scope: str, key: str, fingerprint: str
    ) -> tuple[str, str | None] | None:
        standing = self._keys.get((scope, key))
        if standing is None:
            self._keys[scope, key] = (fingerprint, None)
        return standing

    async def answer_key(self, scope: str, key: str, answer: str) -> None:
        if standing := self._keys.get((scope, key)):
            self._keys[scope, key] = (standing[0], answer)

    async def release_key(self, scope: str, key: str) -> None:
        self._keys.pop((scope, key), None)

    # -- transcripts -----------------------------------------------------------------

    async def read_messages(
        self, segments: Sequence[Segment], upto: int, start: int = 0
    ) -> list[Message]:
        found = []
        for rows, lo, hi in self._cut(self._messages, segments, upto):
            found += [_copy(rows[i]) for i in range(max(lo, start), hi) if i in rows]
        return found

    async def last_index(self, segments: Sequence[Segment], before: int, role: Role) -> int | None:
        for rows, lo, hi in reversed(list(self._cut(self._messages, segments, before))):
            for i in range(hi - 1, lo - 1, -1):
                if i in rows and rows[i].role == role:
                    return i
        return None

    async def list_checkpoints(
        self, segments: Sequence[Segment], upto: int | None = None
    ) -> list[Checkpoint]:
        # a segment's checkpoints lie in (start, end]: the one at a fork point is its source's
        found = [
            _copy(mark)
            for marks, lo, hi in self._cut(self._checkpoints, segments, upto)
            for i, mark in marks.items()
            if lo < i <= hi
        ]
        return sorted(found, key=lambda c: c.message_index)

    # -- helpers ---------------------------------------------------------------------

    @staticmethod
    def _cut(
        table: Mapping[str, dict[int, T]], segments: Sequence[Segment], upto: int | None
    ) -> Iterator[tuple[dict[int, T], int, int]]:
        """For each segment, its run's rows in `table` and its bounds [start, end), cut at
        `upto` and past the last row."""
        for segment in segments:
            rows = table.get(segment.run_id, {})
            last = max(rows, default=segment.start)
            end = min(e for e in (segment.end, upto, last + 1) if e is not None)
            if segment.start < end:
                yield rows, segment.start, end

    def _live_runs(self, session_id: str) -> list[Run]:
        runs = (self._runs[i] for i in self._session_runs.get(session_id, ()))
        return [r for r in runs if not r.hidden]

    def _insert_runs(self, runs: Sequence[Run], incoming: Mapping[str, Sequence[Message]]) -> None:
        """Insert runs (checked already); each with its incoming messages, saved exactly as
        `save` writes a boundary (which bumps the caller's `Run` too)."""
        for run in runs:
            self._runs[run.run_id] = _copy(run)
            self._session_runs.setdefault(run.session_id, []).append(run.run_id)
        for run in runs:
            if messages := incoming.get(run.run_id):
                self._save(run, messages)

    def _refuse_taken_runs(self, runs: Sequence[Run]) -> None:
        ids = [r.run_id for r in runs]
        if len(set(ids)) < len(ids) or any(i in self._runs for i in ids):
            raise Conflict(f"run {', '.join(ids)} already exists")

    def _refuse_in_flight(self, session_id: str) -> None:
        for run in self._live_runs(session_id):
            if run.status in _IN_FLIGHT:
                raise Conflict(
                    f"run {run.run_id} of session {session_id} is in flight; "
                    "wait for it to finish, or cancel it"
                )

    @staticmethod
    def _refuse_locked(session: Session) -> None:
        if session.locked is not None:
            raise Locked.session(session.locked)

    @staticmethod
    def _rollback(session: Session, owner: str) -> Rollback | None:
        """The session's rollback under way if its lease is `owner`'s or ran out."""
        rollback = session.rollback
        if session.locked != "rollback" or rollback is None:
            return None
        return rollback if rollback.lease.open_to(owner) else None


@hookimpl
def runpoint_storage_backends() -> Mapping[str, StorageFactory]:
    return {"memory": MemoryStorage}
