"""The in-memory store's tables, and what more than one of its roles does with them.

Every method runs to completion without awaiting anything, so under asyncio each one is
atomic: no lock is needed. Structs are copied in and out, as a database would, so a
caller changing a `Run` it read or wrote does not change what is stored. The documents of
a transcript (messages, checkpoints, tool results, events, session captures) are kept as
the bytes the codec gave (`Sealed`): sealed, with a keyring (runpoint.core.sealing).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping, MutableMapping, Sequence
from typing import Any, NamedTuple, TypeVar

import msgspec

from runpoint.core import transcript
from runpoint.core.errors import ClaimLost, Conflict, Locked, NotFound
from runpoint.core.schedule import Schedule, ScheduleRun
from runpoint.core.sealing import Codec
from runpoint.core.types import (
    Approval,
    Checkpoint,
    KeyAnswer,
    KeyClaim,
    Message,
    Run,
    RunEvent,
    RunStatus,
    Session,
    SessionCheckpoint,
)

T = TypeVar("T", bound=msgspec.Struct)
Owned = TypeVar("Owned", Run, Approval, Schedule)  # a team's row
IN_FLIGHT = (RunStatus.PENDING, RunStatus.RUNNING)
_encode = msgspec.msgpack.Encoder().encode
_decoders: dict[type[Any], msgspec.msgpack.Decoder[Any]] = {}


def decoded(kind: type[T], document: bytes) -> T:
    decoder = _decoders.get(kind) or _decoders.setdefault(kind, msgspec.msgpack.Decoder(kind))
    found: T = decoder.decode(document)
    return found


def copy(struct: T) -> T:
    """A deep copy (a msgpack round trip: faster than `copy.deepcopy`, and exact)."""
    return decoded(type(struct), _encode(struct))


class Sealed(msgspec.Struct, frozen=True):
    """A document as the codec gave it, with what is queried of it in the clear."""

    data: bytes
    role: str = ""  # a message's
    seq: int = 0  # an event's


class SealedRows(MutableMapping[str, Owned]):
    """A table of structs, each kept as the codec gives its document (bound to the table
    and the row's id). A read is a fresh copy: a struct changed in place is stored again."""

    def __init__(self, tables: Tables, kind: type[Owned], table: str) -> None:
        self._tables, self._table = tables, table
        self._kind: type[Owned] = kind
        self._rows: dict[str, bytes] = {}

    def __getitem__(self, key: str) -> Owned:
        return self._tables._open(self._kind, self._rows[key], self._table, "data", key)

    def __setitem__(self, key: str, value: Owned) -> None:
        self._rows[key] = self._tables._seal(value, value.team_id, self._table, "data", key)

    def __delitem__(self, key: str) -> None:
        del self._rows[key]

    def __contains__(self, key: object) -> bool:
        return key in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


class KeyRow(NamedTuple):
    """An Idempotency-Key's claim: `owner`'s until `expires_at`, then its answer."""

    fingerprint: str
    owner: str
    expires_at: float
    created_at: float
    answer: str | None = None


class SessionCheckpointRow(msgspec.Struct):
    seq: int  # its position: creation order across the store
    checkpoint: SessionCheckpoint
    capture: bytes | None = None


class Tables:
    """The rows, by key: each role of the store is a subclass."""

    def __init__(self, url: str = "memory:") -> None:
        self.url = url
        self._sessions: dict[str, Session] = {}
        self._runs = SealedRows(self, Run, "runs")
        self._run_seqs: dict[str, int] = {}  # insertion order, across the store
        # a session's run ids in the order they were inserted (its newest run is last)
        self._session_runs: dict[str, list[str]] = {}
        # a run's own messages and checkpoints, by index
        self._messages: dict[str, dict[int, Sealed]] = {}
        self._checkpoints: dict[str, dict[int, Sealed]] = {}
        self._events: dict[str, list[Sealed]] = {}  # a run's event log, in order
        self._tool_calls: dict[tuple[str, str], Sealed | None] = {}
        self._keys: dict[tuple[str, str], KeyRow] = {}
        self._session_checkpoints: dict[str, SessionCheckpointRow] = {}
        self._secrets: dict[str, bytes] = {}
        self._approvals = SealedRows(self, Approval, "approvals")
        self._schedules = SealedRows(self, Schedule, "schedules")
        self._fired: dict[tuple[str, float], ScheduleRun] = {}  # by (schedule_id, tick)
        self._holds: dict[str, float] = {}  # schedule_id: until when a pass holds it
        self._seq = itertools.count(1)
        self.codec = Codec()

    def _seal(self, struct: msgspec.Struct, team: str, *binding: object) -> bytes:
        """A struct's document, as the codec gives it for its binding (kind, field, key)."""
        teams = self.codec.teams
        if teams is not None and not teams.held(team):
            key_id, made = teams.new()  # this store's own: it ends with the process
            teams.hold(team, key_id, teams.wrap(team, key_id, made))
        kind, field, *key = binding
        return self.codec.seal(_encode(struct), str(kind), str(field), *key, team=team)

    def _open(self, kind: type[T], stored: bytes, *binding: object) -> T:
        table, field, *key = binding
        return decoded(kind, self.codec.open(stored, str(table), str(field), *key))

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def _live_runs(self, session_id: str) -> list[Run]:
        runs = (self._runs[i] for i in self._session_runs.get(session_id, ()))
        return [r for r in runs if not r.hidden and r.parent_run_id is None]

    def _insert_runs(self, runs: Sequence[Run], incoming: Mapping[str, Sequence[Message]]) -> None:
        """Insert runs (checked already); each with its incoming messages, saved exactly as
        `save` writes a boundary (which bumps the caller's `Run` too)."""
        for run in runs:
            self._runs[run.run_id] = copy(run)
            self._run_seqs[run.run_id] = next(self._seq)
            self._session_runs.setdefault(run.session_id, []).append(run.run_id)
        for run in runs:
            if messages := incoming.get(run.run_id):
                self._save(run, messages)

    def _save(
        self,
        run: Run,
        messages: Sequence[Message],
        checkpoint: Checkpoint | None = None,
        intents: Sequence[str] = (),
        events: Sequence[RunEvent] = (),
    ) -> None:
        """A boundary, as `save` writes it (see `runpoint.seams.storage.Storage.save`)."""
        stored = self._runs.get(run.run_id)
        session = self._sessions.get(run.session_id)
        if stored is None or session is None or stored.revision != run.revision:
            raise Conflict(f"run {run.run_id} was changed by another writer")
        self._append_events(run, events)
        # one place in the session's event log per message, then one for the boundary
        session.event_seq += len(messages) + 1
        indexes = transcript.own_indexes(run, len(messages))
        rows = self._messages.setdefault(run.run_id, {})
        team = run.team_id
        for i, m in zip(indexes, messages, strict=True):
            rows[i] = Sealed(self._seal(m, team, "messages", "data", run.run_id, i), m.role)
        marks = self._checkpoints.setdefault(run.run_id, {})
        if checkpoint is not None and (at := checkpoint.message_index) not in marks:
            # the first checkpoint at an index stands
            mark = msgspec.structs.replace(checkpoint, event_seq=session.event_seq)
            marks[at] = Sealed(self._seal(mark, team, "checkpoints", "data", run.run_id, at))
        for call_id in intents:
            self._tool_calls.setdefault((run.run_id, call_id), None)
        # the store owns these: a writer reads them back, never writes them
        self._runs[run.run_id] = msgspec.structs.replace(
            copy(run),
            revision=run.revision + 1,
            hidden=stored.hidden,
            cancel_requested=stored.cancel_requested,
        )
        run.saved(run.revision + 1, stored.cancel_requested)

    @contextlib.contextmanager
    def _answering(self, answering: KeyAnswer | None) -> Iterator[None]:
        """Answer a claimed key if the write in the block is made (ClaimLost first, and
        nothing written, if the claim is not its owner's any more)."""
        if answering is None:
            yield
            return
        claim = answering.claim
        if (row := self._held(claim)) is None:
            raise ClaimLost(f"Idempotency-Key {claim.key!r} was taken over by a retry")
        yield
        self._keys[claim.scope, claim.key] = row._replace(answer=answering.answer)

    def _held(self, claim: KeyClaim) -> KeyRow | None:
        """The key's claim if it is `claim.owner`'s and unanswered."""
        row = self._keys.get((claim.scope, claim.key))
        return row if row is not None and row.owner == claim.owner and row.answer is None else None

    def _append_events(self, run: Run, events: Sequence[RunEvent]) -> None:
        log = self._events.setdefault(run.run_id, [])
        last = log[-1].seq if log else 0
        log += [  # a seq taken already stands
            Sealed(self._seal(e, run.team_id, "run_events", "data", run.run_id, e.seq), seq=e.seq)
            for e in events
            if e.seq > last
        ]

    def _refuse_taken_runs(self, runs: Sequence[Run]) -> None:
        ids = [r.run_id for r in runs]
        if len(set(ids)) < len(ids) or any(i in self._runs for i in ids):
            raise Conflict(f"run {', '.join(ids)} already exists")

    def _live_session(self, session_id: str) -> Session:
        """The session; NotFound if it went (removed since its runs were read)."""
        if (session := self._sessions.get(session_id)) is None:
            raise NotFound(f"session {session_id} not found")
        return session

    def _refuse_removed_sources(self, runs: Sequence[Run]) -> None:
        """NotFound if a new run would read rows that went since its source was read (of
        a run removed meanwhile, rows no reader left holds)."""
        new = {r.run_id for r in runs}
        for run in runs:
            for s in transcript.inherited(run):
                if s.run_id in new or s.run_id in self._runs:
                    continue  # a run's own rows stay while it does
                held = self._messages.get(s.run_id, {})
                if s.end is None or any(i not in held for i in range(s.start, s.end)):
                    raise NotFound(f"run {run.forked_from_run_id or s.run_id} not found")

    def _refuse_in_flight(self, session_id: str) -> None:
        for run in self._live_runs(session_id):
            if run.status in IN_FLIGHT:
                raise Conflict(
                    f"run {run.run_id} of session {session_id} is in flight; "
                    "wait for it to finish, or cancel it"
                )

    @staticmethod
    def _refuse_locked(session: Session) -> None:
        if session.locked is not None:
            raise Locked.session(session.locked)
