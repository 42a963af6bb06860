"""The run dialect's JSON shapes (see openapi.yaml) and their conversion from kernel types.

Agno's conventions where a client can see them: integer epoch seconds, `metrics` with
`total_tokens`, OpenAI-style `tool_calls` with arguments as JSON text, message keys left
out when empty.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from runpoint.core.types import (
    Checkpoint,
    Edit,
    MessageView,
    Ruling,
    Run,
    ToolExecutionOf,
    Usage,
)
from runpoint.reads.queries import RunDetail, Snapshot

encode = msgspec.json.Encoder().encode


# A run's transcript is thousands of these: none is tracked by the garbage collector (they
# hold no reference back), so reading one leaves nothing for it to walk.


class RunMetrics(msgspec.Struct, gc=False):
    input_tokens: int
    output_tokens: int
    total_tokens: int
    # a run's, in seconds; null for a message, and for what runpoint does not measure
    duration: float | None = None
    time_to_first_token: float | None = None
    # of input_tokens: read from the vendor's prompt cache, and written to it (Agno's names)
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


class Function(msgspec.Struct, gc=False):
    name: str
    arguments: str


class ToolCallOut(msgspec.Struct, gc=False):
    id: str
    function: Function
    type: Literal["function"] = "function"


class MessageOut(msgspec.Struct, omit_defaults=True, gc=False):
    id: str
    role: str
    created_at: int
    content: str | None = None
    model: str | None = None
    tool_calls: list[ToolCallOut] | None = None
    metrics: RunMetrics | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_args: msgspec.Raw | None = None  # as stored: encoded as it is
    tool_call_error: bool | None = None
    from_history: bool = False  # Agno's flag: runpoint lists a run's own messages only
    ruling: Ruling | None = None
    replaces: str | None = None


class Accepted(msgspec.Struct):
    run_id: str
    session_id: str
    status: str


class EditOut(msgspec.Struct):
    kind: str
    message_index: int
    message_id: str
    replaced_message_id: str
    tool_call_id: str | None
    user_id: str | None
    created_at: int


class RunOut(msgspec.Struct):
    run_id: str
    agent_id: str
    agent_name: str | None
    session_id: str
    user_id: str | None
    status: str
    run_input: str | None
    content: str | None
    error: str | None
    model: str | None
    model_provider: str | None
    policy: str | None
    created_at: int
    updated_at: int
    message_count: int
    metrics: RunMetrics
    messages: list[MessageOut] | None
    # the kernel's, encoded as they are: their fields are the wire's, arguments as stored
    tools: list[ToolExecutionOf[msgspec.Raw]] | None
    forked_from_run_id: str | None
    forked_from_message_index: int | None
    forked_from_session_id: str | None
    regenerated_from: str | None
    edits: list[EditOut]
    last_checkpoint_at_message_index: int | None
    cancel_requested: bool
    parent_run_id: str | None  # a member run's: its team run's
    content_type: Literal["str"] = "str"
    session_state: None = None  # runpoint keeps no session state dict


class CheckpointOut(msgspec.Struct, gc=False):
    checkpoint_id: str
    run_id: str
    session_id: str
    message_index: int
    continue_from: int
    status: str
    reason: str
    policy: str
    created_at: int
    message_id: str | None
    message_role: str | None
    message_preview: str | None
    is_latest: bool


class TimelineOut(msgspec.Struct):
    run_id: str
    session_id: str
    checkpoints: list[CheckpointOut]
    edits: list[EditOut]


class SnapshotOut(msgspec.Struct):
    checkpoint: CheckpointOut | None
    snapshot: RunOut
    message_index: int
    requested_message_index: int


def metrics(usage: Usage | None, duration: float | None = None) -> RunMetrics:
    usage = usage or Usage()
    total = usage.input_tokens + usage.output_tokens
    return RunMetrics(
        usage.input_tokens,
        usage.output_tokens,
        total,
        duration,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )


def provider(model_name: str | None) -> str | None:
    """A model's provider: what its name says before the colon ("openai:gpt-4o")."""
    return model_name.partition(":")[0] if model_name else None


def message(m: MessageView) -> MessageOut:
    return MessageOut(
        m.id,
        m.role,
        int(m.created_at),
        m.content,
        m.model,
        # the arguments' JSON text is what they are stored as
        [ToolCallOut(c.id, Function(c.name, bytes(c.arguments).decode())) for c in m.tool_calls]
        if m.tool_calls
        else None,
        metrics(m.usage) if m.usage else None,
        m.tool_call_id,
        m.tool_name,
        m.tool_args or None,
        m.tool_call_error if m.role == "tool" else None,
        ruling=m.ruling,
        replaces=m.replaces,
    )


def edit(e: Edit) -> EditOut:
    return EditOut(
        kind=e.kind,
        message_index=e.message_index,
        message_id=e.message_id,
        replaced_message_id=e.replaced_message_id,
        tool_call_id=e.tool_call_id,
        user_id=e.user_id,
        created_at=int(e.created_at),
    )


def run(
    r: Run, detail: RunDetail[MessageView] | None = None, *, agent_name: str | None = None
) -> RunOut:
    """A run; with its transcript and tools when `detail` is given."""
    return RunOut(
        run_id=r.run_id,
        agent_id=r.agent_id,
        agent_name=agent_name,
        session_id=r.session_id,
        user_id=r.user_id,
        status=r.status,
        run_input=r.input,
        content=r.content,
        error=r.error,
        model=r.model,
        model_provider=provider(r.model),
        policy=r.policy,
        created_at=int(r.created_at),
        updated_at=int(r.updated_at),
        message_count=r.message_count,
        metrics=metrics(r.usage, r.updated_at - r.created_at),
        messages=[message(m) for m in detail.messages] if detail else None,
        tools=detail.tools if detail else None,
        forked_from_run_id=r.forked_from_run_id,
        forked_from_message_index=r.forked_from_message_index,
        forked_from_session_id=r.forked_from_session_id,
        regenerated_from=r.regenerated_from,
        edits=[edit(e) for e in r.edits],
        last_checkpoint_at_message_index=r.last_checkpoint_at_message_index,
        cancel_requested=r.cancel_requested,
        parent_run_id=r.parent_run_id,
    )


def run_detail(detail: RunDetail[MessageView], agent_name: str | None = None) -> RunOut:
    return run(detail.run, detail, agent_name=agent_name)


def checkpoint(c: Checkpoint, *, is_latest: bool) -> CheckpointOut:
    return CheckpointOut(
        c.checkpoint_id,
        c.run_id,
        c.session_id,
        c.message_index,
        c.message_index,  # continue_from
        c.status,
        c.reason,
        c.policy,
        int(c.created_at),
        c.message_id,
        c.message_role,
        c.message_preview,
        is_latest,
    )


def timeline(r: Run, checkpoints: list[Checkpoint]) -> TimelineOut:
    last = len(checkpoints) - 1
    return TimelineOut(
        run_id=r.run_id,
        session_id=r.session_id,
        checkpoints=[checkpoint(c, is_latest=i == last) for i, c in enumerate(checkpoints)],
        edits=[edit(e) for e in r.edits],
    )


def snapshot(s: Snapshot[MessageView], agent_name: str | None = None) -> SnapshotOut:
    # Only the end checkpoint is known to be the latest without reading the timeline.
    cp = s.checkpoint
    return SnapshotOut(
        checkpoint=checkpoint(cp, is_latest=cp.reason == "end") if cp else None,
        snapshot=run_detail(s.detail, agent_name),
        message_index=s.message_index,
        requested_message_index=s.requested_index,
    )
