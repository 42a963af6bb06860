"""What the checks store: sessions, runs, messages and checkpoints with fresh ids, so that
checks never see each other's rows even when their backends share one database."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec

from runpoint.core.types import (
    Checkpoint,
    Lease,
    Message,
    Role,
    Run,
    RunStatus,
    Segment,
    Session,
    SessionCheckpoint,
    ToolCall,
    Usage,
    now,
)
from runpoint.seams.storage import Storage


def fresh(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:12]}"


def session(**fields: Any) -> Session:
    return Session(session_id=fresh("session"), agent_id=fresh("agent"), **fields)


def run(of: Session, *, status: RunStatus = RunStatus.COMPLETED, **fields: Any) -> Run:
    """A new run of a session (COMPLETED, so that another may start in it)."""
    run_id = fresh("run")
    return Run(
        run_id=run_id,
        session_id=of.session_id,
        agent_id=of.agent_id,
        team_id=of.team_id,
        status=status,
        segments=[Segment(run_id, 0)],
        **fields,
    )


def fork(source: Run, at: int, **fields: Any) -> Run:
    """A run that continues `source`'s first `at` messages (copy-on-write: it lays them
    out by segments), in the same session."""
    run_id = fresh("fork")
    inherited = [
        Segment(s.run_id, s.start, at if s.end is None else min(s.end, at))
        for s in source.segments
        if s.start < at
    ]
    return Run(
        run_id=run_id,
        session_id=source.session_id,
        agent_id=source.agent_id,
        team_id=source.team_id,
        status=fields.pop("status", RunStatus.COMPLETED),
        segments=[*inherited, Segment(run_id, at)],
        message_count=fields.pop("message_count", at),
        forked_from_run_id=source.run_id,
        forked_from_message_index=at,
        **fields,
    )


def messages(count: int, label: str = "message") -> list[Message]:
    """User and assistant turns in turn, each saying its label and number (the same
    messages on every call, to compare with what is read back)."""
    roles: tuple[Role, Role] = ("user", "assistant")
    return [
        Message(role=roles[i % 2], content=f"{label} {i}", id=f"{label}-{i}", created_at=_T0 + i)
        for i in range(count)
    ]


_T0 = 1_750_000_000.125


def tool_turn(call_id: str) -> list[Message]:
    """An assistant turn calling a tool, and the tool's result."""
    call = ToolCall(call_id, "book", {"city": "Lima", "nights": 2})
    return [
        Message(role="assistant", tool_calls=[call], usage=Usage(3, 4), model="scripted:demo"),
        Message(
            role="tool",
            content="booked",
            tool_call_id=call_id,
            tool_name="book",
            tool_args={"city": "Lima", "nights": 2},
        ),
    ]


def checkpoint(of: Run, index: int, reason: str = "checkpoint") -> Checkpoint:
    return Checkpoint(
        checkpoint_id=fresh("checkpoint"),
        run_id=of.run_id,
        session_id=of.session_id,
        message_index=index,
        reason="end" if reason == "end" else "checkpoint",
        policy="tool-batch",
        status=of.status,
    )


def session_checkpoint(of: Session, owner: str = "me", seconds: float = 60) -> SessionCheckpoint:
    """A PENDING session checkpoint whose lease is `owner`'s for `seconds` (run out if
    negative)."""
    return SessionCheckpoint(
        checkpoint_id=fresh("session-checkpoint"),
        session_id=of.session_id,
        event_seq=of.event_seq,
        lease=Lease(owner, now() + seconds),
    )


async def started(
    store: Storage, incoming: list[Message] | None = None, **fields: Any
) -> tuple[Session, Run]:
    """A new session with one run born with `incoming` messages (its writer's revision is
    the stored one)."""
    new_session = session()
    new_run = run(new_session, message_count=len(incoming or ()), **fields)
    await store.create_sessions([new_session], [new_run], {new_run.run_id: incoming or []})
    return new_session, new_run


async def finished(store: Storage, count: int = 10) -> tuple[Session, Run]:
    """A finished run of `count` messages with a checkpoint every second one, the last
    its end."""
    session, run = await started(store, messages(2))
    await append(store, run, [], checkpoint(run, 2))
    for at in range(4, count + 1, 2):
        reason = "end" if at == count else "checkpoint"
        await append(store, run, messages(at)[at - 2 :], checkpoint(run, at, reason))
    return session, run


async def append(
    store: Storage, to: Run, new: list[Message], mark: Checkpoint | None = None
) -> None:
    """Save a boundary of `to`: `new` messages at its end, and `mark` if any."""
    to.count_appended(to.message_count + len(new), None)
    await store.save(to, new, mark)


async def transcript(store: Storage, of: Run) -> list[Message]:
    return await store.read_messages(of.segments, of.message_count)


def diff(got: object, want: object) -> str:
    """What an assertion that `got == want` says when they differ: their differing
    fields, if they are structs of one kind."""
    if type(got) is not type(want) or not isinstance(got, msgspec.Struct):
        return f"got {got!r}, want {want!r}"
    fields = [
        f"{name}: got {getattr(got, name)!r}, want {getattr(want, name)!r}"
        for name in got.__struct_fields__
        if getattr(got, name) != getattr(want, name)
    ]
    return f"{type(got).__name__} differs in " + "; ".join(fields)


def as_json(value: object) -> Any:
    """`value` encoded, then decoded into plain values: what it says in JSON, whatever
    the spacing and key order of documents a backend gave back (a PostgreSQL JSONB
    column's are its own: `plugins/sql/` keeps documents as written)."""
    return msgspec.json.decode(msgspec.json.encode(value))
