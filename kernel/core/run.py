"""A run: what it is made with, its state, and the transitions that change that state;
its transcript's layout (segments, edits), its checkpoints and its events."""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from typing import Any, Literal

import msgspec

from runpoint.core.messages import Decision, Role, Usage
from runpoint.core.stamps import now
from runpoint.core.tenancy import DEFAULT_TEAM


class RunStatus(enum.StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    ERROR = "ERROR"
    CANCELLED = "CANCELLED"
    REGENERATED = "REGENERATED"


IN_FLIGHT = frozenset({RunStatus.PENDING, RunStatus.RUNNING})  # someone executes it, or will


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
    # a member's run in a crew's run tree: the crew run it works for and the leader's
    # delegation call that started it (see runpoint.runs.crews)
    parent_run_id: str | None = None
    parent_tool_call_id: str | None = None
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

    # -- transitions -----------------------------------------------------------------
    # A run's fields are set when it is made (`Run(...)`, or a copy by
    # `msgspec.structs.replace`); after that only these transitions change them, and a
    # field not listed here is never changed. Who changes which:
    #
    # field                             transition        called by
    # --------------------------------  ----------------  ---------------------------------
    # status                            accept            Executor.accept
    #                                   start             Execution.execute, Executor._take
    #                                   recover           Leases._recover
    #                                   end               Execution.finish, Execution.pause,
    #                                                     Leases._give_up
    #                                   cancel            Commands.cancel
    #                                   mark_regenerated  Continuation._branch
    # error                             start, recover,   (as for status)
    #                                   end
    #                                   continue_with     Continuation._resume
    # model                             continue_with     Continuation._resume
    # message_count                     continue_with     Continuation._resume
    #                                   count_appended    BoundaryWriter.append
    # usage                             count_appended    BoundaryWriter.append
    # decisions                         continue_with     Continuation._resume
    #                                   spend_decisions   Execution.tool_batch
    #                                   clear_batch       Execution.tool_batch
    # in_doubt                          mark_in_doubt     Execution.execute
    #                                   clear_batch       Execution.tool_batch
    #                                   cancel            Commands.cancel
    # last_checkpoint_at_message_index  mark_checkpoint   BoundaryWriter.reach_boundary
    # content                           stamp_boundary    BoundaryWriter.save
    # updated_at                        stamp_boundary    BoundaryWriter.save
    #                                   cancel            Commands.cancel
    # lease_owner, lease_expires_at     lease_to          Leases.stamp, Leases.offer,
    #                                                     MemoryRuns.renew_leases
    # recoveries                        recover           Leases._recover
    # cancel_requested                  request_cancel    Commands.cancel,
    #                                                     MemoryRuns.request_cancel
    #                                   saved             (as for revision)
    # revision                          saved             the storages once they wrote it:
    #                                                     sql.transcripts.saved,
    #                                                     Births.written (sql),
    #                                                     MemoryTranscripts._save
    # hidden                            hide              MemorySessions.rollback_session
    #
    # The SQL storage changes `lease_expires_at`, `cancel_requested` and `hidden` in its
    # rows (renew_leases, request_cancel, rollback_session); a writer reads the flag back
    # with `saved`.

    # -- its status ----------------------------------------------------------------

    def accept(self, *, background: bool) -> None:
        """Accepted for its write: PENDING until its first step in the background (a
        client will poll), else RUNNING."""
        self.status = RunStatus.PENDING if background else RunStatus.RUNNING

    def continue_with(
        self, added: int, decisions: Mapping[str, Decision], model: str | None
    ) -> None:
        """Picked up again in place: `added` new input messages, a person's decisions
        (added to those of an earlier continue the batch still waits on), and the model it
        switches to, if any."""
        if model is not None:
            self.model = model
        self.error = None
        self.message_count += added
        self.decisions = {**self.decisions, **decisions}

    def start(self) -> None:
        """Executed from here on, in this process."""
        self.status = RunStatus.RUNNING
        self.error = None

    def recover(self) -> None:
        """Claimed from a process that died, to be resumed (a PENDING run is started)."""
        self.recoveries += 1
        self.start()

    def end(self, status: RunStatus, error: str | None = None) -> None:
        """Stopped: PAUSED for a person, or ended (COMPLETED, CANCELLED, ERROR and why)."""
        self.status = status
        self.error = error

    def cancel(self, in_doubt: list[str] | None = None) -> None:
        """Cancelled while nobody executes it, naming the calls its lost process may have
        left in doubt, if it had one."""
        if in_doubt is not None:
            self.in_doubt = in_doubt
        self.status = RunStatus.CANCELLED
        self.updated_at = now()

    def request_cancel(self) -> None:
        """A cancel waits for the process that executes it."""
        self.cancel_requested = True

    def mark_regenerated(self) -> None:
        """Replaced by a run that regenerated its final answer."""
        self.status = RunStatus.REGENERATED

    def hide(self) -> None:
        """Rolled back out of its session's live history."""
        self.hidden = True

    # -- its execution ---------------------------------------------------------------

    def mark_in_doubt(self, call_ids: list[str]) -> None:
        """The calls of its batch that may or may not have run."""
        self.in_doubt = call_ids

    def spend_decisions(self, call_ids: Collection[str]) -> None:
        """Decisions to run side-effecting calls, used up as the calls start."""
        self.decisions = {i: d for i, d in self.decisions.items() if i not in call_ids}

    def clear_batch(self) -> None:
        """Its batch is done: no call in doubt, every decision applied."""
        self.in_doubt = []
        self.decisions = {}

    def count_appended(self, message_count: int, usage: Usage | None) -> None:
        """Messages appended to its transcript, now `message_count` long, that cost
        `usage`."""
        self.message_count = message_count
        if usage is not None:
            self.usage = self.usage + usage

    def mark_checkpoint(self, message_index: int) -> None:
        self.last_checkpoint_at_message_index = message_index

    def stamp_boundary(self, content: str | None) -> None:
        """As a durable boundary writes it: its content so far, changed now."""
        self.content = content
        self.updated_at = now()

    # -- its durability ----------------------------------------------------------------

    def lease_to(self, owner: str | None, expires_at: float | None) -> None:
        """Executed by `owner` until `expires_at` (None, None: by nobody; None and a time:
        left to the run queue until then)."""
        self.lease_owner = owner
        self.lease_expires_at = expires_at

    def saved(self, revision: int, cancel_requested: bool) -> None:
        """As the storage's write left it: its revision, and whether a cancel waits."""
        self.revision = revision
        self.cancel_requested = cancel_requested


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


class RunEvent(msgspec.Struct, omit_defaults=True, gc=False):
    """What a run reports while it goes: stored in its run's event log, streamed to
    clients from there, passed to plugins. `data` holds JSON values (and structs such as
    `Usage`) alone, so an event is not tracked by the garbage collector (see
    `runpoint.core.messages.ToolCall`)."""

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
