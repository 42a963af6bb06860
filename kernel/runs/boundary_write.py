"""One execution's transcript, the counts its checkpoint policy reads, and its durable
writes: at a boundary, the policy is asked, and the run, the messages since the last write,
a checkpoint if the policy wants one and the events that tell of them are written together.
The loop (`runpoint.runs.execution.Execution`) builds on it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from runpoint.core import transcript
from runpoint.core.types import Checkpoint, Message, Run, RunEvent, ToolCall, new_id, stopwatch
from runpoint.durable.leases import Leases
from runpoint.durable.outages import Outlast
from runpoint.runs.event_log import EventLog
from runpoint.seams.agent import Agent
from runpoint.seams.host import RunHooks
from runpoint.seams.policy import BatchCall, Boundary, BoundaryKind, CheckpointPolicy
from runpoint.seams.storage import Storage


@dataclass(kw_only=True)
class BoundaryWriter:
    """An execution's transcript and counts, and how it writes them."""

    agent: Agent
    policy_name: str
    policy: CheckpointPolicy
    storage: Storage
    leases: Leases
    outlast: Outlast  # retries the run's writes through an outage while the lease holds
    hook: RunHooks
    run: Run
    events: EventLog
    transcript: list[Message] = field(default_factory=list)  # durable but for `unsaved`
    unsaved: list[Message] = field(default_factory=list)
    model_turns: int = 0  # this execution's
    tool_batches: int = 0
    # those of the transcript as loaded (a fork's inherited prefix, earlier executions'):
    # a policy sees counts over the whole transcript. Counted in the messages the loop
    # reads whole anyway, so nothing is stored that could disagree with the transcript.
    turns_before: int = 0
    batches_before: int = 0
    # the run's content: its last answer's, kept as messages come (a run of tool calls
    # alone would have its whole transcript read back at every boundary)
    content: str | None = None

    def loaded(self, messages: list[Message]) -> None:
        """The transcript so far, as read."""
        self.transcript = messages
        self.content = transcript.final_content(messages[self.run.own_start :])

    def append(self, message: Message) -> None:
        if message.role == "assistant" and message.content:
            self.content = message.content
        self.transcript.append(message)
        self.unsaved.append(message)
        self.run.count_appended(len(self.transcript), message.usage)
        self.hook.runpoint_message_appended(
            run=self.run, message=message, index=len(self.transcript) - 1
        )

    async def reach_boundary(
        self, kind: BoundaryKind, batch: Sequence[ToolCall] = (), ending: str | None = None
    ) -> None:
        """Ask the policy; write the checkpoint and the messages it closes together, with
        the events that tell of them (and `ending`, the event that ends the run, if any):
        a stream never tells of a write that did not happen."""
        # A run that failed mid-batch ends at the last whole boundary before it.
        index = transcript.safe_boundary(self.transcript, len(self.transcript))
        tools = self.agent.tool_map
        boundary = Boundary(
            kind=kind,
            message_index=index,
            model_turns=self.turns_before + self.model_turns,
            tool_batches=self.batches_before + self.tool_batches,
            agent=self.agent,
            batch=tuple(
                BatchCall(c.name, tools[c.name].effect if c.name in tools else None) for c in batch
            ),
        )
        checkpoint = None
        # an end where the run has a checkpoint already leaves that one (a client may hold
        # its id): the run's status records the end
        if (
            self.policy.is_checkpoint(boundary)
            and index != self.run.last_checkpoint_at_message_index
        ):
            last = self.transcript[index - 1] if index else None
            checkpoint = Checkpoint(
                checkpoint_id=new_id(),
                run_id=self.run.run_id,
                session_id=self.run.session_id,
                message_index=index,
                reason="end" if kind == "end" else "checkpoint",
                policy=self.policy_name,
                status=self.run.status,
                message_id=last.id if last else None,
                message_role=last.role if last else None,
                message_preview=transcript.preview(last) if last else None,
            )
            self.run.mark_checkpoint(index)
            self.event("CheckpointCreated", checkpoint=msgspec.to_builtins(checkpoint))
        if ending is not None:
            self.event(ending, content=self.content, error=self.run.error, usage=self.run.usage)
        took = stopwatch()
        await self.save(checkpoint)
        if checkpoint is not None:
            self.hook.runpoint_checkpoint_written(
                run=self.run, checkpoint=checkpoint, timing=took()
            )

    async def save(self, checkpoint: Checkpoint | None, intents: Sequence[str] = ()) -> None:
        """A durable boundary, with the events waiting to be stored."""
        held = self.leases.held_until(self.run)  # as stored: this write renews it
        self.leases.stamp(self.run)
        self.run.stamp_boundary(self.content)
        async with self.events.writing() as events:
            await self.outlast(
                lambda: self.storage.save(
                    self.run, self.unsaved, checkpoint, intents=intents, events=events
                ),
                held,
            )
        self.unsaved = []

    def event(self, name: str, /, **data: Any) -> None:
        self.events.add(RunEvent.of(self.run, name, **data))
