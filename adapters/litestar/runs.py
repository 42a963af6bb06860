"""The run dialect's runs: start, read, follow, cancel and continue a run, and fork its
session (see openapi.yaml). A run's get-run, timeline and snapshots are served from the
documents the app keeps (see documents.py)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from litestar import Response

from runpoint.core.types import Approve, Decision, Reject, Run, RunStatus
from runpoint.facade import ContinueRun, CreateRun, ForkSession, RunHandle, Runpoint

from . import catalog_wire, inputs, sse, wire
from .documents import Documents, Key
from .edit_requests import edit_requests
from .errors import HttpError
from .handlers import Handler, Reply, agent_name, agent_names, operation
from .json_fields import decoded, holds_nul


class ToolDecision(msgspec.Struct):
    """A decision on a paused tool call; Agno's ToolExecution dicts fit it too."""

    tool_call_id: str
    confirmed: bool | None = None
    result: str | None = None
    tool_args: dict[str, Any] | None = None  # confirmed with these (a person's edit)
    confirmation_note: str | None = None  # not confirmed, and why (the model reads it)

    def decision(self) -> Decision | None:
        """What the person decided, if anything."""
        if self.result is not None:
            return self.result
        if self.confirmed and self.tool_args is not None:
            return Approve(self.tool_args)
        if self.confirmed is False and self.confirmation_note and self.confirmation_note.strip():
            return Reject(self.confirmation_note)
        return self.confirmed


@operation
async def create_agent_run(
    rp: Runpoint,
    *,
    agent_id: str,
    message: str,
    stream: bool,
    background: bool,
    session_id: str | None,
    user_id: str | None,
    idempotency_key: str | None,
    events: sse.Events,
) -> Reply:
    request = CreateRun(
        agent_id=agent_id,
        message=message,
        session_id=session_id or None,
        user_id=user_id,
        background=background,
    )
    handle = await rp.create_run(request, stream=stream, idempotency_key=idempotency_key)
    return await _started(rp, handle, stream, background, events)


async def _kept(
    rp: Runpoint,
    documents: Documents,
    key: Key,
    session_id: str,
    agent_id: str,
    document: Callable[[Run], Awaitable[msgspec.Struct]],
) -> Reply:
    """The run's document `key`, as kept for the run as it reads now, else made from it
    (and kept). The run is read, and refused, as every read of it is."""
    run = await rp.queries.run(key[1], session_id=session_id, agent_id=agent_id)
    if (body := documents.get(key, run)) is None:
        body = wire.encode(await document(run))
        documents.keep(key, run, body)
    return Response(body, media_type="application/json")


@operation
async def get_agent_run(
    rp: Runpoint, *, agent_id: str, run_id: str, session_id: str, documents: Documents
) -> Reply:
    async def document(run: Run) -> msgspec.Struct:
        return wire.run_detail(await rp.views.whole(run), agent_name(rp, agent_id))

    return await _kept(rp, documents, ("run", run_id, 0), session_id, agent_id, document)


@operation
async def get_agent_run_events(
    rp: Runpoint,
    *,
    agent_id: str,
    run_id: str,
    session_id: str,
    last_event_id: int | None,
    after: int | None,
    events: sse.Events,
) -> Reply:
    # a reconnecting EventSource sends the header, with the URL (and `after`) it first had
    point = next((p for p in (last_event_id, after) if p is not None), 0)
    found = await rp.follow(run_id, session_id=session_id, agent_id=agent_id, after=point)
    return sse.EventStream(found, events, names=agent_names(rp))


@operation
async def resume_agent_run_stream(
    rp: Runpoint,
    *,
    agent_id: str,
    run_id: str,
    session_id: str | None,
    last_event_index: int | None,
    events: sse.Events,
) -> Reply:
    # AgentOS counts events from 0, the event log from 1: index i is the event of seq i + 1
    after = 0 if last_event_index is None else last_event_index + 1
    found = await rp.follow(run_id, session_id=session_id, agent_id=agent_id, after=after)
    return sse.EventStream(found, events, names=agent_names(rp))


@operation
async def list_agent_runs(
    rp: Runpoint, *, agent_id: str, session_id: str, status: RunStatus | None
) -> Reply:
    rp.agent(agent_id)  # an unknown agent is a 404
    details = await rp.views.list_run_details(session_id)
    return [
        wire.run_detail(d, agent_name(rp, agent_id))
        for d in details
        if d.run.agent_id == agent_id and status in (None, d.run.status)
    ]


@operation
async def cancel_agent_run(
    rp: Runpoint, *, agent_id: str, run_id: str, session_id: str | None
) -> Reply:
    run = await rp.cancel(run_id, session_id=session_id, agent_id=agent_id)
    return wire.run(run, agent_name=agent_name(rp, agent_id))


@operation
async def get_agent_run_checkpoints(
    rp: Runpoint, *, agent_id: str, run_id: str, session_id: str, documents: Documents
) -> Reply:
    async def document(run: Run) -> msgspec.Struct:
        return wire.timeline(run, await rp.queries.checkpoints(run))

    return await _kept(rp, documents, ("timeline", run_id, 0), session_id, agent_id, document)


@operation
async def get_agent_run_checkpoint_snapshot(
    rp: Runpoint,
    *,
    agent_id: str,
    run_id: str,
    message_index: int,
    session_id: str,
    documents: Documents,
) -> Reply:
    async def document(run: Run) -> msgspec.Struct:
        return wire.snapshot(await rp.views.at(run, message_index), agent_name(rp, agent_id))

    key = ("snapshot", run_id, message_index)
    return await _kept(rp, documents, key, session_id, agent_id, document)


async def continue_run(
    rp: Runpoint,
    *,
    agent_id: str,
    run_id: str,
    session_id: str,
    continue_from: str | int,
    input: str | None,
    stream: bool,
    background: bool,
    fork: bool,
    regenerate: bool,
    replace_original: bool | None,
    tools: str | list[Any] | None,
    edits: str | list[Any] | None,
    model: str | None,
    idempotency_key: str | None,
    events: sse.Events,
    member_run_id: str | None = None,
) -> Reply:
    """The agents' continue, and the teams' (`member_run_id`: from a member's checkpoint)."""
    request = ContinueRun(
        run_id=run_id,
        session_id=session_id,
        agent_id=agent_id,
        continue_from=inputs.continue_from(continue_from),
        input=input,
        fork=fork,
        regenerate=regenerate,
        replace_original=replace_original,
        tools=_decisions(tools),
        edits=edit_requests(edits),
        model=model,
        background=background,
        member_run_id=msgspec.UNSET if member_run_id is None else member_run_id,
    )
    handle = await rp.continue_run(request, stream=stream, idempotency_key=idempotency_key)
    return await _started(rp, handle, stream, background, events)


def operation_of(handler: Handler, name: str, rename: dict[str, str], drop: str = "") -> Handler:
    """`handler` as the operation `name`: its parameters renamed by `rename` (the
    contract's names for them), `drop` left out (left at its default)."""

    async def named(rp: Runpoint, **given: Any) -> Reply:
        return await handler(rp, **{rename.get(k, k): v for k, v in given.items()})

    back = {v: k for k, v in rename.items()}
    parameters = inspect.signature(handler).parameters.values()
    named.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [p.replace(name=back.get(p.name, p.name)) for p in parameters if p.name != drop]
    )
    named.__name__ = name
    return named


operation(operation_of(continue_run, "continue_agent_run", {}, drop="member_run_id"))


@operation
async def fork_agent_session(
    rp: Runpoint, *, agent_id: str, session_id: str, idempotency_key: str | None
) -> Reply:
    request = ForkSession(session_id=session_id, agent_id=agent_id)
    forked = await rp.fork_session(request, idempotency_key=idempotency_key)
    return catalog_wire.ForkedSession(forked.session_id, session_id)


async def _started(
    rp: Runpoint, handle: RunHandle, stream: bool, background: bool, events: sse.Events
) -> Reply:
    """A started run's response: its event stream, at once its id (background), or the
    run once it stops. A retry's (see Idempotency-Key) events went to the first request."""
    if stream and not handle.replayed:
        return sse.EventStream(handle.batches(), events, names=agent_names(rp))
    if background:
        run = handle.run
        accepted = wire.Accepted(run.run_id, run.session_id, run.status)
        return Response(wire.encode(accepted), status_code=202, media_type="application/json")
    run = await handle.result()
    return wire.run_detail(await rp.views.get_run(run.run_id), agent_name(rp, run.agent_id))


def _decisions(tools: str | list[Any] | None) -> dict[str, Decision] | None:
    """`tools` (JSON text from a form, or a JSON array) as {tool_call_id: decision}: the
    result a person gave, or whether to run the call; with neither it stays undecided."""
    if tools is None or tools == "":
        return None
    try:
        decisions = msgspec.convert(
            decoded(tools, "tools", "Invalid JSON in tools field"), list[ToolDecision]
        )
    except msgspec.ValidationError as exc:
        raise HttpError(400, "BAD_REQUEST", f"Invalid structure for tools: {exc}") from None
    decided: dict[str, Decision] = {}
    for i, d in enumerate(decisions):
        # JSON text escapes a NUL, which the document's patterns then cannot see (a JSON
        # body's `tool_args` are a tool's arguments, kept whole as a model's are)
        if isinstance(tools, str) and holds_nul(msgspec.to_builtins(d)):
            raise HttpError(422, "VALIDATION_ERROR", f"tools[{i}] must not contain U+0000 (NUL)")
        if (decision := d.decision()) is not None:
            decided[d.tool_call_id] = decision
    return decided
