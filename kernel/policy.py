"""Checkpoint policies: small pure objects that say which boundaries are resume points."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

import msgspec

# "tool_batch": every call of a model turn has its result; "end": the run stopped
# (COMPLETED, ERROR or CANCELLED). A paused run is not at a boundary: it waits mid-turn.
BoundaryKind = Literal["tool_batch", "end"]


class Boundary(msgspec.Struct, frozen=True):
    """A point between steps of a run where its transcript is whole: no tool call is
    without its result, so the run can be resumed or forked there."""

    kind: BoundaryKind
    message_index: int
    model_turns: int
    tool_batches: int


class CheckpointPolicy(Protocol):
    def is_checkpoint(self, boundary: Boundary) -> bool: ...


# What a plugin registers under a policy's name: called with an agent's
# `checkpoint_options` as keyword arguments when the server starts (and for each
# execution), it refuses options it cannot take by raising.
CheckpointPolicyFactory = Callable[..., CheckpointPolicy]
