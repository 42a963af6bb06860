"""Checkpoint policies: small pure objects that say which boundaries are resume points."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

import msgspec

from runpoint.seams.agent import Agent, Effect

# "tool_batch": every call of a model turn has its result; "end": the run stopped
# (COMPLETED, ERROR or CANCELLED). A paused run is not at a boundary: it waits mid-turn.
BoundaryKind = Literal["tool_batch", "end"]


class BatchCall(msgspec.Struct, frozen=True):
    """One call of the tool batch a boundary closes."""

    tool_name: str
    effect: Effect | None  # None: the agent has no tool of that name (the call ran nothing)


class Boundary(msgspec.Struct, frozen=True):
    """A point between steps of a run where its transcript is whole: no tool call is
    without its result, so the run can be resumed or forked there."""

    kind: BoundaryKind
    message_index: int
    # Counted over the run's whole transcript from index 0, the prefix a fork or a
    # continuation inherits included: every run that reaches a boundary, however many
    # executions it took, sees the same counts there.
    model_turns: int
    tool_batches: int  # the batches with all their results
    agent: Agent
    batch: tuple[BatchCall, ...] = ()  # the batch this boundary closes; none at "end"


class CheckpointPolicy(Protocol):
    def is_checkpoint(self, boundary: Boundary) -> bool: ...


# What a plugin registers under a policy's name: called with an agent's
# `checkpoint_options` as keyword arguments when the server starts (and for each
# execution), it refuses options it cannot take by raising.
CheckpointPolicyFactory = Callable[..., CheckpointPolicy]
