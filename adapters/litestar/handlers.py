"""One function per operationId of openapi.yaml (AgentOS's session operations are in
sessions.py, and `get_openapi`, which serves the document the app is built from, in
reference.py); the app routes each operation to the function of that name. A handler's
keyword arguments are the operation's validated inputs (path and query parameters and
body fields, by name); it returns a wire struct, a list of them, a ready Response, a run's
events (`sse.EventStream`), or None for an empty body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from weakref import WeakKeyDictionary

import msgspec
from litestar import Response

from runpoint.adapters.metrics import Metrics
from runpoint.core.types import Approve, Decision, Reject, Run
from runpoint.facade import Runpoint
from runpoint.runs.executor import RunHandle

from . import inputs, sse, wire
from .cursors import Cursors
from .documents import Documents, Key
from .edit_requests import edit_requests
from .errors import HttpError
from .json_fields import decoded, holds_nul
from .session_wire import SessionWire

Reply = msgspec.Struct | Sequence[msgspec.Struct] | Response[Any] | sse.EventStream | None
Handler = Callable[..., Awaitable[Reply]]
HANDLERS: dict[str, Handler] = {}


def operation(handler: Handler) -> Handler:
    HANDLERS[handler.__name__] = handler
    return handler


class Health(msgspec.Struct):
    status: str = "ok"


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
async def health(rp: Runpoint) -> Reply:
    return Health()


class Ready(msgspec.Struct):
    status: str
    checks: dict[str, str]


@operation
async def ready(rp: Runpoint) -> Reply:
    checks = await rp.readiness()
    if all(outcome == "ok" for outcome in checks.values()):
        return Ready("ready", checks)
    body = wire.encode(Ready("unready", checks))
    return Response(body, status_code=503, media_type="application/json")


@operation
async def get_metrics(rp: Runpoint) -> Reply:
    if (metrics := rp.host.find(Metrics)) is None:
        raise HttpError(
            501,
            "METRICS_UNAVAILABLE",
            "this server keeps no metrics: they need prometheus_client "
            "(pip install 'runpoint[otel]')",
        )
    body, media_type = await metrics.scrape(rp)
    return Response(body, headers={"Content-Type": media_type})


def agent_name(rp: Runpoint, agent_id: str) -> str | None:
    """The agent's display name, if this server has the agent."""
    agent = rp.agents.get(agent_id)
    return agent.name if agent else None


@operation
async def get_config(rp: Runpoint) -> Reply:
    return wire.ConfigOut("runpoint", "runpoint", [wire.agent(a) for a in rp.agents.values()])


@operation
async def list_agents(rp: Runpoint) -> Reply:
    return [wire.agent(a) for a in rp.agents.values()]


@operation
async def get_agent(rp: Runpoint, *, agent_id: str) -> Reply:
    return wire.agent(rp.agent(agent_id))


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
    handle = await rp.create_run(
        agent_id,
        message,
        session_id=session_id or None,
        user_id=user_id,
        stream=stream,
        background=background,
        idempotency_key=idempotency_key,
    )
    return await _started(rp, handle, stream, background, events)


@operation
async def get_agent_run(rp: Runpoint, *, agent_id: str, run_id: str, session_id: str) -> Reply:
    run = await rp.find_run(run_id, session_id=session_id, agent_id=agent_id)

    async def document() -> msgspec.Struct:
        return wire.run_detail(await rp.views.whole(run), agent_name(rp, agent_id))

    return await _kept(rp, ("run", run_id, 0), run, document)


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
    return sse.EventStream(found, events)


@operation
async def cancel_agent_run(
    rp: Runpoint, *, agent_id: str, run_id: str, session_id: str | None
) -> Reply:
    run = await rp.cancel(run_id, session_id=session_id, agent_id=agent_id)
    return wire.run(run, agent_name=agent_name(rp, agent_id))


# each app's, by its Runpoint (two apps in a process may serve two databases)
_DOCUMENTS: WeakKeyDictionary[Runpoint, Documents] = WeakKeyDictionary()


async def _kept(
    rp: Runpoint, key: Key, run: Run, document: Callable[[], Awaitable[msgspec.Struct]]
) -> Reply:
    """The run's document `key`, as kept for the run as it is, else made (and kept)."""
    if (documents := _DOCUMENTS.get(rp)) is None:
        documents = _DOCUMENTS[rp] = Documents()
    if (body := documents.get(key, run)) is None:
        body = wire.encode(await document())
        documents.keep(key, run, body)
    return Response(body, media_type="application/json")


@operation
async def get_agent_run_checkpoints(
    rp: Runpoint, *, agent_id: str, run_id: str, session_id: str
) -> Reply:
    run = await rp.find_run(run_id, session_id=session_id, agent_id=agent_id)

    async def document() -> msgspec.Struct:
        return wire.timeline(run, await rp.checkpoints(run))

    return await _kept(rp, ("timeline", run_id, 0), run, document)


@operation
async def get_agent_run_checkpoint_snapshot(
    rp: Runpoint, *, agent_id: str, run_id: str, message_index: int, session_id: str
) -> Reply:
    run = await rp.find_run(run_id, session_id=session_id, agent_id=agent_id)

    async def document() -> msgspec.Struct:
        return wire.snapshot(await rp.views.at(run, message_index), agent_name(rp, agent_id))

    return await _kept(rp, ("snapshot", run_id, message_index), run, document)


@operation
async def continue_agent_run(
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
) -> Reply:
    handle = await rp.continue_run(
        run_id,
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
        stream=stream,
        background=background,
        idempotency_key=idempotency_key,
    )
    return await _started(rp, handle, stream, background, events)


@operation
async def fork_agent_session(
    rp: Runpoint, *, agent_id: str, session_id: str, idempotency_key: str | None
) -> Reply:
    forked = await rp.fork_session(session_id, agent_id=agent_id, idempotency_key=idempotency_key)
    return wire.ForkedSession(forked.session_id, session_id)


async def _started(
    rp: Runpoint, handle: RunHandle, stream: bool, background: bool, events: sse.Events
) -> Reply:
    """A started run's response: its event stream, at once its id (background), or the
    run once it stops. A retry's (see Idempotency-Key) events went to the first request."""
    if stream and not handle.replayed:
        return sse.EventStream(handle.batches(), events)
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


# -- the session dialect (/v2/) ---------------------------------------------------------


async def _session_wire(rp: Runpoint) -> SessionWire:
    return SessionWire(Cursors(await rp.secret("cursors")))


@operation
async def create_session_checkpoint(rp: Runpoint, *, session_id: str, label: str | None) -> Reply:
    created = await rp.session_checkpoints.create(session_id, label=label)
    body = (await _session_wire(rp)).envelope(created)
    return Response(wire.encode(body), status_code=201, media_type="application/json")


@operation
async def list_session_checkpoints(
    rp: Runpoint, *, session_id: str, page_size: int, page_token: str | None
) -> Reply:
    answer = await _session_wire(rp)
    found, next_position = await rp.session_checkpoints.page(
        session_id, page_size=page_size, before=answer.page_position(session_id, page_token)
    )
    return answer.page(session_id, found, next_position)


@operation
async def get_session_checkpoint(rp: Runpoint, *, session_id: str, checkpoint_id: str) -> Reply:
    checkpoint = await rp.session_checkpoints.get(session_id, checkpoint_id)
    return (await _session_wire(rp)).envelope(checkpoint)


@operation
async def delete_session_checkpoint(rp: Runpoint, *, session_id: str, checkpoint_id: str) -> Reply:
    await rp.session_checkpoints.delete(session_id, checkpoint_id)
    return None


@operation
async def rollback_session_checkpoint(
    rp: Runpoint, *, session_id: str, checkpoint_id: str
) -> Reply:
    checkpoint = await rp.session_checkpoints.rollback(session_id, checkpoint_id)
    return (await _session_wire(rp)).envelope(checkpoint)


@operation
async def fork_session_at_checkpoint(
    rp: Runpoint, *, session_id: str, from_checkpoint_id: str | None, count: int
) -> Reply:
    checkpoint, sessions = await rp.session_checkpoints.fork(
        session_id, from_checkpoint_id=from_checkpoint_id, count=count
    )
    return (await _session_wire(rp)).forks(checkpoint, sessions)
