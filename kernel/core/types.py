"""Domain types: one set of msgspec structs from storage to the wire."""

from __future__ import annotations

import enum
import time
import uuid
from collections.abc import Callable
from typing import Any, Generic, Literal, TypeVar

import msgspec

from runpoint.core.tenancy import DEFAULT_TEAM

Role = Literal["system", "user", "assistant", "tool"]


class Approve(msgspec.Struct, frozen=True, tag="approve"):
    """A person's decision to run a paused tool call with `arguments`, their edit of the
    model's (checked against the tool's schema before it is accepted)."""

    arguments: dict[str, Any]


class Reject(msgspec.Struct, frozen=True, tag="reject"):
    """A person's decision not to run a paused tool call, and why: the model reads `reason`."""

    reason: str


# A person's decision on a paused tool call: run it as the model proposed (True), do not
# (False), its result, given instead of running it (a str), run it with edited arguments
# (Approve), or do not and say why (Reject).
Decision = bool | str | Approve | Reject
# What a person decided about a call, as its result records it
Ruling = Literal["approved", "edited", "rejected", "answered"]


def new_id() -> str:
    return str(uuid.uuid4())


def now() -> float:
    return time.time()


class Timing(msgspec.Struct, frozen=True):
    """When something started (epoch seconds) and how long it took (seconds, measured by
    a monotonic clock, so that a clock set back or forward meanwhile changes nothing)."""

    started_at: float
    seconds: float


def stopwatch() -> Callable[[], Timing]:
    """Started now: each call gives the time from then to the call."""
    started_at, start = now(), time.perf_counter()
    return lambda: Timing(started_at, time.perf_counter() - start)


class RunStatus(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    ERROR = "ERROR"
    CANCELLED = "CANCELLED"
    REGENERATED = "REGENERATED"


IN_FLIGHT = frozenset({RunStatus.PENDING, RunStatus.RUNNING})  # someone executes it, or will


class Usage(msgspec.Struct, omit_defaults=True, gc=False):
    """Tokens a model turn (or a run's turns) took. `input_tokens` counts every prompt
    token; of them, `cache_read_tokens` were read from the vendor's prompt cache and
    `cache_write_tokens` written to it (each billed at its own rate). Zeros are not stored,
    so a row written before the cache fields reads as no cache use."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


class ToolCall(msgspec.Struct, omit_defaults=True):
    id: str
    name: str
    arguments: dict[str, Any] = {}


class Message(msgspec.Struct, omit_defaults=True):
    """One entry of a run's transcript; `index` is its position in the run."""

    role: Role
    content: str | None = None
    id: str = msgspec.field(default_factory=new_id)
    created_at: float = msgspec.field(default_factory=now)
    # assistant turns
    tool_calls: list[ToolCall] | None = None
    usage: Usage | None = None
    model: str | None = None
    # tool results
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_args: dict[str, Any] | None = None  # the arguments it ran with
    tool_call_error: bool = False
    ruling: Ruling | None = None  # what a person decided about the call, if one did
    # an edit's: the id of the message of the source run this one stands in for
    replaces: str | None = None


class CallView(msgspec.Struct, gc=False):
    """A tool call as stored, read to be shown (see `MessageView`)."""

    id: str
    name: str
    arguments: msgspec.Raw = msgspec.Raw(b"{}")


class MessageView(msgspec.Struct, omit_defaults=True, gc=False):
    """A `Message` as stored, read to be shown rather than run: what a run would read as
    values (its calls' arguments, a result's `tool_args`) stays the JSON text it is stored
    as, never made into dicts, and no view is tracked by the garbage collector (none holds
    a reference back to another): reading a long transcript makes no garbage to collect.
    A view encodes as its message was stored."""

    role: Role
    content: str | None = None
    id: str = ""
    created_at: float = 0.0
    tool_calls: list[CallView] | None = None
    usage: Usage | None = None
    model: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_args: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    tool_call_error: bool = False
    ruling: Ruling | None = None
    replaces: str | None = None


# a tool call's arguments: decoded (a dict) or, read to be shown, their JSON text
Args = TypeVar("Args")


class ToolExecutionOf(msgspec.Struct, Generic[Args], gc=False):
    """A tool call and, once it ran, its result; derived from the transcript."""

    tool_call_id: str
    tool_name: str
    tool_args: Args  # as it ran (a person may have edited the model's)
    result: str | None = None
    tool_call_error: bool = False
    requires_confirmation: bool = False
    # started, and not known to have finished when its process died: a person decides
    in_doubt: bool = False
    message_index: int = 0
    ruling: Ruling | None = None
    proposed_args: Args | None = None  # the model's, where a person edited them


ToolExecution = ToolExecutionOf[dict[str, Any]]  # as plugins see them: arguments decoded


class Segment(msgspec.Struct, array_like=True):
    """The part [start, end) of a run's transcript stored under `run_id`.

    A fork's transcript is its ancestors' segments cut at the fork point followed by its
    own rows: copy-on-write, no message is ever copied. `end` is None for the open tail.
    """

    run_id: str
    start: int
    end: int | None = None


EditKind = Literal["user_message", "tool_result", "tool_arguments"]


class Edit(msgspec.Struct, frozen=True, omit_defaults=True):
    """A message a fork replaced in its source's history when it was made (lineage): the
    kind of edit, where (its index, the same in both runs), the message replaced and the
    fork's own message in its place, and who asked."""

    kind: EditKind
    message_index: int
    replaced_message_id: str
    message_id: str
    team_id: str
    user_id: str | None = None
    tool_call_id: str | None = None
    created_at: float = msgspec.field(default_factory=now)


class Run(msgspec.Struct, omit_defaults=True):
    run_id: str
    session_id: str
    agent_id: str
    status: RunStatus = RunStatus.PENDING
    # its session's team, kept here too so a run is checked without reading its session
    team_id: str = DEFAULT_TEAM
    user_id: str | None = None
    input: str | None = None
    content: str | None = None
    error: str | None = None
    model: str | None = None
    policy: str | None = None
    created_at: float = msgspec.field(default_factory=now)
    updated_at: float = msgspec.field(default_factory=now)
    # transcript layout and size (the last segment is this run's own rows)
    segments: list[Segment] = []
    message_count: int = 0
    # the run whose transcript precedes this one as session history
    previous_run_id: str | None = None
    # lineage
    forked_from_run_id: str | None = None
    forked_from_message_index: int | None = None
    forked_from_session_id: str | None = None
    regenerated_from: str | None = None
    # what a fork changed in its source's history (see runpoint.runs.edits)
    edits: list[Edit] = []
    # instructions that replace its agent's for this run (a fan-out's branch)
    instructions: str | None = None
    last_checkpoint_at_message_index: int | None = None
    usage: Usage = msgspec.field(default_factory=Usage)
    # tool calls the run is paused on because they may or may not have run
    in_doubt: list[str] = []
    # a person's decisions on its paused tool calls, by tool_call_id, written with the
    # continue that sent them and kept until the batch is done (see runpoint.runs.execution)
    decisions: dict[str, Decision] = {}
    # rolled back: kept and readable, but no longer part of its session's live history
    hidden: bool = False
    # the storage's count of writes to this run, for one writer at a time
    revision: int = 0
    # durability (see runpoint.durable.leases): who executes the run until when, how often it
    # was resumed after its process died, and whether a cancel is waiting for it
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    recoveries: int = 0
    cancel_requested: bool = False

    @property
    def own_start(self) -> int:
        """Index of this run's first own message (0 unless it is a fork)."""
        return self.segments[-1].start if self.segments else 0


class Checkpoint(msgspec.Struct, omit_defaults=True, gc=False):
    """A resume point: the run's transcript cut at `message_index`, as it was then."""

    checkpoint_id: str
    run_id: str
    session_id: str
    message_index: int
    reason: Literal["checkpoint", "end"]
    policy: str
    status: RunStatus
    created_at: float = msgspec.field(default_factory=now)
    message_id: str | None = None
    message_role: Role | None = None
    message_preview: str | None = None
    # the cursor of its boundary in the session's event log (read from its row)
    event_seq: int | None = None


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


class RunEvent(msgspec.Struct, omit_defaults=True):
    """What a run reports while it goes: stored in its run's event log, streamed to
    clients from there, passed to plugins."""

    event: str
    run_id: str
    session_id: str
    agent_id: str
    created_at: float = msgspec.field(default_factory=now)
    data: dict[str, Any] = {}
    # its place in its run's event log, from 1 (0 until it has one): increasing, and the
    # same for every reader, since an event is sent only once it is stored
    seq: int = 0

    @classmethod
    def of(cls, run: Run, name: str, /, **data: Any) -> RunEvent:
        """`run`'s event `name`, with the fields of `data` that are not None."""
        return cls(
            event=name,
            run_id=run.run_id,
            session_id=run.session_id,
            agent_id=run.agent_id,
            data={k: v for k, v in data.items() if v is not None},
        )


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
