"""The storage seam, one small protocol per role; `Storage` is all of them.

Rows are append-only: messages keyed by (run_id, index), checkpoints by (run_id,
message_index); a fork stores only its own rows (see `Segment`). Each session has an event
log whose cursor (`Session.event_seq`) only grows: every message and every boundary takes
the next place in it. Every method is atomic: it writes all it says or nothing.

The writes that start a run (or make a session) take `answering`, a `KeyAnswer`: they then
record its answer on its claimed Idempotency-Key in the same transaction, if the claim is
still its owner's and unanswered; if not, they write nothing and raise `ClaimLost`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

from runpoint.core.errors import Unavailable
from runpoint.core.types import (
    Checkpoint,
    KeyAnswer,
    KeyClaim,
    Message,
    MessageView,
    Role,
    Rollback,
    Run,
    RunEvent,
    Segment,
    Session,
    SessionCapture,
    SessionCheckpoint,
)
from runpoint.seams.approvals import ApprovalStore
from runpoint.seams.jobs import JobStore
from runpoint.seams.retention import RetentionStore
from runpoint.seams.schedules import ScheduleStore

if TYPE_CHECKING:
    from runpoint.core.sealing import Codec


class RunStore(Protocol):
    """Run rows: a run is inserted once, then written only through `save`."""

    async def create_runs(
        self,
        runs: Sequence[Run],
        incoming: Mapping[str, Sequence[Message]] = {},
        *,
        answering: KeyAnswer | None = None,
    ) -> None:
        """Insert new runs (forks), all or nothing; Locked if their session is locked,
        NotFound if it went or if a run would read rows that went (its source removed
        since it was read, and what it reads held by no reader left).

        A run is born with its input: its `incoming[run_id]` messages are written in the
        same transaction, exactly as `save` would write them right after the insert (the
        next places of the session's event log; the run's `revision` bumped, in the row and
        on the `Run`), so no run is ever without them. They are its own rows below its
        `message_count`, in index order (`runpoint.core.transcript.own_indexes`): the last ones,
        but for a fork born with edits, whose own segments also hold the messages it
        edited, between the segments it inherits."""

    async def start_in_session(
        self, run: Run, incoming: Sequence[Message] = (), *, answering: KeyAnswer | None = None
    ) -> Run:
        """Insert a new run at the head of its session with its `incoming` messages (as
        `create_runs`), atomically: raise Locked if the session is locked, NotFound as
        `create_runs`, Conflict if a run of it is in flight (PENDING or RUNNING); otherwise
        the run follows the session's newest live run (its `previous_run_id`). Returns the
        run as inserted."""

    async def get_run(self, run_id: str) -> Run | None:
        """The run as last saved (every field of `Run`, its `revision`, lease and
        `cancel_requested` included), hidden or not; None if unknown."""

    async def list_runs(self, session_id: str) -> list[Run]:
        """The live (not rolled back) runs of a session, oldest first (insertion order):
        not members' runs (those with a `parent_run_id`), which neither a session's
        history nor its head includes."""

    async def member_runs(self, run_id: str) -> list[Run]:
        """The runs whose `parent_run_id` is `run_id` (a crew run's members), oldest
        first."""


class TranscriptStore(Protocol):
    """A run's boundaries: its messages, its checkpoints and its side-effecting calls."""

    async def save(
        self,
        run: Run,
        messages: Sequence[Message],
        checkpoint: Checkpoint | None,
        *,
        intents: Sequence[str] = (),
        answering: KeyAnswer | None = None,
        events: Sequence[RunEvent] = (),
    ) -> None:
        """One durable boundary, in one transaction: append `messages` (the last
        `len(messages)` of `run.message_count`, at `runpoint.core.transcript.own_indexes`),
        update the run row, write `checkpoint`
        (unless the run has one at its index: the first stands, so an id once announced
        stays resolvable), record that the side-effecting calls `intents` (tool_call_ids)
        are about to run, and append `events` to the run's event log (as `append_events`).
        The messages take the next places of the session's event log, then the boundary
        takes one.

        One writer per run: this raises Conflict (writing nothing) if the run was written
        since it was read (its `revision` moved on), and bumps `run.revision` when it
        succeeds. Every field of the run that changes as it goes is written, with its lease
        and recoveries; `cancel_requested` is read back onto `run`, never written."""

    async def read_messages(
        self, segments: Sequence[Segment], upto: int, start: int = 0
    ) -> list[Message]:
        """Messages `start` to `upto` (excluded) of the transcript laid out by `segments`,
        in index order; only those stored (an `upto` past the end is no error)."""

    async def read_views(
        self, segments: Sequence[Segment], upto: int, start: int = 0
    ) -> list[MessageView]:
        """The same messages as `read_messages`, as views (read to be shown, not run)."""

    async def last_index(self, segments: Sequence[Segment], before: int, role: Role) -> int | None:
        """The index of the last message of `role` before `before`, if any; this reads
        backwards through an index, so its cost does not grow with the transcript."""

    async def list_checkpoints(
        self, segments: Sequence[Segment], upto: int | None = None
    ) -> list[Checkpoint]:
        """The checkpoints of a transcript (inherited ones included) at message indexes
        up to `upto` (all if None), ordered by message_index, each with its `event_seq`.
        A segment [start, end) owns the checkpoints in (start, end]: the one at a fork
        point is its source's."""

    async def record_tool_results(self, run_id: str, results: Sequence[Message]) -> None:
        """Record, durably and together, how calls recorded by `save` ended (each its tool
        message, keyed by its `tool_call_id`); a call never recorded is ignored."""

    async def tool_records(
        self, run_id: str, tool_call_ids: Sequence[str]
    ) -> dict[str, Message | None]:
        """The recorded calls among these: their result, or None if it never came. Calls
        never recorded are absent."""


class EventStore(Protocol):
    """Each run's event log: what its executions reported, kept to be streamed again."""

    async def append_events(self, run: Run, events: Sequence[RunEvent]) -> bool:
        """Append `events` (their `seq` set, increasing, past the run's stored ones) to the
        run's log if its revision is still `run.revision` (one writer per run); False
        (nothing written) otherwise. An event is stored exactly as given: every field but
        its run's ids reads back equal (`data` in its key order, `created_at` to the bit)."""

    async def read_events(self, run: Run, after: int, limit: int) -> list[RunEvent]:
        """The run's stored events whose `seq` is past `after`, in order, `limit` at most,
        with the run's ids (run, session, agent)."""

    async def last_event_seq(self, run_id: str) -> int:
        """The `seq` of the run's last stored event; 0 if it has none."""


class SessionStore(Protocol):
    """Sessions, their locks and rollbacks, and session checkpoints."""

    async def create_sessions(
        self,
        sessions: Sequence[Session],
        runs: Sequence[Run] = (),
        incoming: Mapping[str, Sequence[Message]] = {},
        *,
        answering: KeyAnswer | None = None,
    ) -> None:
        """Insert sessions, and the runs they start with (each with its `incoming`
        messages, as `create_runs`), all or nothing; `Conflict` if an id is taken,
        NotFound if a run would read rows that went (a session fork's source removed
        since it was read, and what it reads held by no reader left)."""

    async def get_session(self, session_id: str) -> Session | None:
        """The session, with its event-log cursor, lock and rollback as they are now."""

    async def list_sessions(self, *, team_id: str, limit: int, offset: int) -> list[Session]:
        """A team's sessions, newest (`created_at`) first, ties by session_id."""

    async def first_inputs(self, session_ids: Sequence[str]) -> dict[str, str | None]:
        """The input of each session's first live run, by session id (none: no run)."""

    async def rename_session(self, session_id: str, name: str | None) -> bool:
        """Set the session's `session_name` (None: no name); False if unknown."""

    async def delete_sessions(self, session_ids: Sequence[str]) -> bool:
        """Delete sessions with their runs, messages, events, checkpoints and session
        checkpoints, all or nothing; False (nothing deleted) if one is unknown. Raises
        Conflict while a run of one is in flight, or a session not among them forks one
        (its runs read their messages)."""

    async def lock_session(
        self, session_id: str, reason: str, rollback: Rollback | None = None
    ) -> bool:
        """Lock a session (`reason`: "rollback" with its `rollback`, or "maintenance"),
        atomically: raise Locked if it is locked, Conflict if a run of it is in flight.
        False if there is no session."""

    async def unlock_session(self, session_id: str, rollback_owner: str | None = None) -> bool:
        """Lift a session's lock, whatever its reason; with `rollback_owner`, only a
        rollback's whose lease is that owner's or ran out. False if there is no session
        (or no such lock)."""

    async def hold_rollback(self, session_id: str, rollback: Rollback) -> bool:
        """Make `rollback`'s lease the lease of the session's rollback under way (to the
        same checkpoint) if that one is the same owner's (a renewal) or ran out (a take
        over); False if another owner holds it, or the rollback is over."""

    async def rollback_session(self, session_id: str, runs: Sequence[Run], owner: str) -> bool:
        """In one transaction, if the session's rollback lease is `owner`'s or ran out: hide
        its live runs (kept, readable by id), insert `runs` as its new live runs, lift its
        lock and count the rollback as an event (the cursor moves on by one). False
        (nothing written) otherwise."""

    async def add_session_checkpoint(self, checkpoint: SessionCheckpoint) -> None:
        """Insert a (PENDING) session checkpoint; it takes the session's next position."""

    async def update_session_checkpoint(
        self, checkpoint: SessionCheckpoint, capture: bytes | None, owner: str | None
    ) -> bool:
        """Rewrite a PENDING session checkpoint (a renewed lease, or how it ended, with its
        encoded `SessionCapture` if READY) if its lease is `owner`'s or ran out (`owner`
        None: only if it ran out). False (nothing written) if it is PENDING no longer, or
        another owner holds it."""

    async def get_session_checkpoint(self, checkpoint_id: str) -> SessionCheckpoint | None:
        """The session checkpoint as last written; None if unknown."""

    async def session_capture(self, checkpoint_id: str) -> SessionCapture | None:
        """What a READY session checkpoint captured; None before (or if unknown)."""

    async def list_session_checkpoints(
        self, session_id: str, *, limit: int, before: int | None
    ) -> list[tuple[int, SessionCheckpoint]]:
        """A session's checkpoints, newest first, with their position: those before
        `before` (a position of an earlier page, or any integer a client sent), `limit`
        at most."""

    async def delete_session_checkpoint(self, checkpoint_id: str) -> None:
        """Delete a session checkpoint and its capture; nothing if unknown."""


class LeaseStore(Protocol):
    """Who executes the runs in flight: leases, their expiry, and cancel requests."""

    async def renew_leases(self, owner: str, run_ids: Collection[str], until: float) -> None:
        """Extend, to `until`, the leases `owner` holds on these PENDING or RUNNING runs;
        the others are left as they are."""

    async def expired_runs(self, before: float, agent_ids: Collection[str]) -> list[Run]:
        """Some PENDING or RUNNING runs of these agents whose lease ran out before
        `before` (or that have none), earliest expiry first: a bounded batch, so a caller
        polls again for more. Runs of other agents never take a place in the batch, nor
        member runs (`parent_run_id`) whose crew run is PENDING, RUNNING or PAUSED (its
        execution resumes them); those of a crew run that ended (or is gone) are included,
        to be settled (`runpoint.runs.crews`)."""

    async def request_cancel(self, run_id: str) -> bool:
        """Flag a PENDING or RUNNING run for cancellation (its writer sees the flag at its
        next save); False if the run is in neither state."""


class IdempotencyKeyStore(Protocol):
    """The first answer to a request sent with an Idempotency-Key, for its retries. A claim
    is its owner's until `until`, renewed while its request is under way, and answered by
    the write that makes the request's run (see `answering` above)."""

    async def claim_key(
        self, claim: KeyClaim, fingerprint: str, until: float
    ) -> tuple[str, str | None] | None:
        """Claim an idempotency key for a request, atomically, for `claim.owner` until
        `until`: None if this call claimed it (the key was free, or its claim was never
        answered and ran out before now: taken over, whatever request it was for), else the
        claim that stands (its request's fingerprint and, once known, its answer)."""

    async def renew_key(self, claim: KeyClaim, until: float) -> None:
        """Extend the claim to `until` if it is `claim.owner`'s and unanswered."""

    async def release_key(self, claim: KeyClaim) -> None:
        """Give up a claim whose request failed, so a retry starts afresh; nothing if it is
        answered (its run was made) or another owner's."""

    async def remove_answered_keys(self, before: float, limit: int) -> int:
        """Delete answered keys first claimed before `before`, `limit` at most, in one
        transaction: how many (claims not answered stay, whatever their age)."""


class SecretStore(Protocol):
    """Random secrets of the database, the same for every process that opens it."""

    async def secret(self, name: str, new: bytes) -> bytes:
        """The secret `name`: the one stored, else `new`, stored now (when two processes
        race, the first `new` stored is every process's)."""


class Storage(
    RunStore,
    TranscriptStore,
    EventStore,
    SessionStore,
    LeaseStore,
    IdempotencyKeyStore,
    SecretStore,
    RetentionStore,
    ApprovalStore,
    JobStore,
    ScheduleStore,
    Protocol,
):
    """A storage backend: every role, opened once before use and closed after."""

    async def open(self) -> None:
        """Create or upgrade the schema if needed; called once before any other method."""

    async def close(self) -> None:
        """Release connections; nothing is called after."""


@runtime_checkable
class Migrated(Protocol):
    """Optional, for a backend with a schema: the migrations not applied yet (readiness)."""

    async def pending_migrations(self) -> list[str]: ...


@runtime_checkable
class Diagnosed(Protocol):
    """Optional, for a backend that can fail for reasons of its own (a server gone, a disk
    full): which of its failures are such an outage, as the error a client is given."""

    def outage(self, exc: BaseException) -> Unavailable | None: ...

    async def probe(self) -> None:
        """Whether it serves (readiness): a read, and a write while writes have been
        failing for lack of space; raises what it meets."""


class Resealed(NamedTuple):
    """What a pass over the stored documents did: rows it sealed anew (under their team's
    key, or the keyring's first), and the rows it could not (each `table(key).column:
    why`), or with `check`, the rows that are not under that key; and the team keys it
    wrapped anew under the keyring's first key."""

    resealed: int
    problems: list[str]
    rewrapped: int = 0


@runtime_checkable
class Encrypted(Protocol):
    """Optional, for a backend that keeps what it stores at rest through a codec
    (runpoint.core.sealing): it hands every document a user, a tool or a model wrote to
    `codec.seal` with the document's binding (its kind, field and row key) where it
    encodes it, stores the bytes it gets back, and hands them back unchanged to
    `codec.open` (or `open_rows`) with the same binding where it decodes them. The codec
    seals and authenticates; a document that does not open is `Unreadable`. A backend
    without it is refused a keyring, rather than keeping documents in the clear. The
    conformance suite checks this contract with a recording codec."""

    @property
    def codec(self) -> Codec:
        """The codec it seals and opens with (one without a keyring until given one)."""

    def encrypt_with(self, codec: Codec) -> None:
        """Seal and open through `codec` from now on; called before `open`."""

    async def reseal(self, *, encrypt: bool, check: bool, batch: int) -> Resealed:
        """Seal anew under the keyring's first key every document that is not, in bounded
        batches that each commit (online: a row written meanwhile is left as written);
        with `encrypt`, rows in the clear too, and the database is then recorded as
        encrypted once none is left. With `check`, change nothing: list them."""


@runtime_checkable
class ErasesTeams(Protocol):
    """Optional, for an `Encrypted` backend that seals each team's documents under a key
    of the team's own (crypto-shredding): `runpoint team erase`."""

    async def erase_team(self, team: str) -> bool:
        """Delete `team`'s key, so what was sealed under it never opens again, and record
        the erasure (every process drops the key within seconds); False if the backend
        holds nothing of the team. The team's next write gets a new key."""

    async def remove_erased(self, batch: int) -> int | None:
        """Delete a batch of rows of an erased team made before its erasure (`batch`
        sessions, with their runs): how many sessions, 0 if a team's erasure just ended,
        None once no erasure is left to do. Each batch commits: a removal killed midway
        goes on where it stopped."""


# A storage backend is built from a database URL.
StorageFactory = Callable[[str], Storage]
