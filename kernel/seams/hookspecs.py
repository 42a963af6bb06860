"""Every hook runpoint calls, in three families: run, checkpoint-policy and storage.

Hooks are synchronous: they register things or notify. Asynchronous work lives on the
objects they register (`Model`, `Storage`, `SessionState`), which are `typing.Protocol`s.
A notification that raises is logged and the run goes on; a name two plugins register
is refused at start-up (see `runpoint.seams.host`).
Implement a hook with the `runpoint.hookimpl` marker, in a module named by an entry point
of the group ``runpoint``::

    [project.entry-points.runpoint]
    my_plugin = "my_package.my_module"

Each hook below is documented in docs/hooks.md too; a test keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from runpoint import hookspec
from runpoint.core.schedule import Schedule, ScheduleRun
from runpoint.core.types import Approval, Checkpoint, Message, Run, Timing, ToolExecution
from runpoint.seams.model import ModelProvider
from runpoint.seams.policy import CheckpointPolicyFactory
from runpoint.seams.retention import Removed
from runpoint.seams.runqueue import RunQueueFactory
from runpoint.seams.session_state import SessionState
from runpoint.seams.storage import StorageFactory

# -- run family: model providers and lifecycle notifications ------------------------


@hookspec
def runpoint_model_providers() -> Mapping[str, ModelProvider]:
    """Register model providers by prefix: ``{"scripted": factory}`` makes the model
    string ``"scripted:demo"`` call ``factory("demo")``. The host makes one model per
    string and shares it between runs, concurrent ones too."""
    raise NotImplementedError


@hookspec
def runpoint_run_started(run: Run) -> None:
    """A run (new, forked or resumed) is about to take its first step."""


@hookspec
def runpoint_message_appended(run: Run, message: Message, index: int) -> None:
    """A message joined the run's transcript at `index`: the input, durable already, or
    one the run produced, durable at the next boundary."""


@hookspec
def runpoint_tool_batch_done(run: Run, executions: Sequence[ToolExecution]) -> None:
    """Every tool call of one model turn has a result."""


@hookspec
def runpoint_model_turn_done(
    run: Run, model: str, message: Message | None, error: Exception | None, timing: Timing
) -> None:
    """A model turn ended: its assistant `message` (just appended), or the `error` it
    failed with (the run then ends ERROR)."""


@hookspec
def runpoint_tool_call_done(run: Run, message: Message, timing: Timing) -> None:
    """One of the agent's tools was called and returned or raised: `message` is the call's
    result, about to join the transcript."""


@hookspec
def runpoint_checkpoint_written(run: Run, checkpoint: Checkpoint, timing: Timing) -> None:
    """A checkpoint and the messages it closes were committed, by a write that took
    `timing`."""


@hookspec
def runpoint_run_finished(run: Run) -> None:
    """The run stopped: COMPLETED, PAUSED, CANCELLED or ERROR (see `run.status`)."""


@hookspec
def runpoint_run_recovered(run: Run) -> None:
    """This process claimed a run whose process died, to resume it (`run.recoveries`
    counts the times)."""


@hookspec
def runpoint_approval_requested(approval: Approval, run: Run) -> None:
    """A run paused on calls that wait for a person: `approval` is what the inbox shows
    (`GET /approvals/{id}`), for a plugin to tell people (a chat message, a webhook)."""


@hookspec
def runpoint_retention_swept(removed: Removed, timing: Timing) -> None:
    """A retention sweep ended: what it removed (see runpoint.durable.retention)."""


@hookspec
def runpoint_schedule_fired(schedule: Schedule, fired: ScheduleRun, delay: float) -> None:
    """This process fired a schedule's tick as the run `fired.run_id`, `delay` seconds
    after the tick's time (see runpoint.durable.schedules)."""


@hookspec
def runpoint_schedule_missed(schedule: Schedule, ticks: int) -> None:
    """A schedule moved past `ticks` ticks that fired nothing (no server ran then)."""


@hookspec
def runpoint_schedule_retried(schedule: Schedule, fired: ScheduleRun) -> None:
    """A schedule's failed run was continued from its last checkpoint, as attempt
    `fired.attempt`."""


# -- checkpoint-policy family -------------------------------------------------------


@hookspec
def runpoint_checkpoint_policies() -> Mapping[str, CheckpointPolicyFactory]:
    """Register checkpoint policies by the name agents choose them with: a factory
    (a class, say) that takes an agent's `checkpoint_options` as keyword arguments."""
    raise NotImplementedError


@hookspec
def runpoint_session_state() -> Mapping[str, SessionState]:
    """Register state-capture objects by name: each session checkpoint stores what their
    `capture` returns under that name; rollback and fork `restore` it."""
    raise NotImplementedError


# -- storage family -----------------------------------------------------------------


@hookspec
def runpoint_storage_backends() -> Mapping[str, StorageFactory]:
    """Register storage backends by database URL scheme (``"sqlite"``, ...)."""
    raise NotImplementedError


@hookspec
def runpoint_encryption_keys() -> Mapping[str, bytes]:
    """Register encryption keys by id (32 bytes each, for AES-256-GCM), as a KMS would
    hand them out: the first registered seals what is stored, every one opens it. Used
    when no `--encryption-keys` file is given (see docs/operations.md, "Encryption at
    rest")."""
    raise NotImplementedError


@hookspec
def runpoint_run_queues() -> Mapping[str, RunQueueFactory]:
    """Register run queues by database URL scheme: background runs on such a database are
    handed out through the queue to any process (see `runpoint.seams.runqueue`)."""
    raise NotImplementedError
