"""A run's events as Server-Sent Events, in Agno's format: `event: <Name>` and one line of
compact JSON holding the common fields with the event's own fields beside them, after an
`id:` line, the event's place in its run's event log (see runpoint.reads.streams), which a client
that lost its stream sends back to resume it. A stream opens with `retry:` and, whenever it
has been quiet for a while, sends a comment: proxies that close idle connections leave it
open, and the client learns early that a silent connection is dead.

Agno's client logs an error for every event it does not know, so runpoint's own events
(CheckpointCreated, ToolCallDelta) go only to clients that ask for every event; it skips
comments and `id:` and `retry:` lines, as the SSE format says."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import msgspec
from litestar.response import Stream

from runpoint.core.types import RunEvent, Usage
from runpoint.seams.crew import MEMBER

from .wire import encode, metrics

MEDIA_TYPE = "text/event-stream"  # Litestar adds "; charset=utf-8"
# proxies must pass events through as they come
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
# the events runpoint sends that Agno 3.1.10's run_output_event_from_dict knows
AGNO_EVENTS = frozenset(
    {"RunStarted", "RunContinued", "ModelRequestStarted", "ModelRequestCompleted", "RunContent",
     "ToolCallStarted", "ToolCallCompleted", "RunContentCompleted", "RunCompleted", "RunPaused",
     "RunCancelled", "RunError"}
)  # fmt: skip
Events = Literal["agno", "all"]
RETRY_MS = 1_000  # how long a client waits before it reconnects
KEEPALIVE = b": keep-alive\n\n"
FRAMES_KEPT = 10_000  # events' frames kept for the other followers of their runs
NO_NAMES: Mapping[str, str] = MappingProxyType({})
_formatted: dict[tuple[str, int, bool], bytes] = {}  # by (run_id, seq, team): oldest first


def _fields(event: RunEvent) -> dict[str, Any]:
    """The event's own fields, with token counts where Agno reads them: at the top level
    of ModelRequestCompleted, as `metrics` on the events that end a run."""
    data = dict(event.data)
    if (usage := data.pop("usage", None)) is None:
        return data
    counts = metrics(msgspec.convert(usage, Usage, from_attributes=True))
    if event.event == "ModelRequestCompleted":
        return data | msgspec.structs.asdict(counts)
    return data | {"metrics": counts}


def format_event(event: RunEvent, team: bool = False, names: Mapping[str, str] = NO_NAMES) -> bytes:
    """The event's frame; a team run's (`team`) as AgentOS names a team's: TeamRunStarted
    for Agno's RunStarted, and so on, with `team_id` and `team_name` (runpoint's own keep
    their names). A member's event relayed in its team run's log is the member's, as
    AgentOS relays it: its own name, `agent_id`, `agent_name` and `run_id`, with the team
    run's as `parent_run_id`. `names` are the display names by agent (or team) id: one
    without a name has none in its events, as Agno leaves out what is None."""
    fields = _fields(event)
    if (member := fields.pop(MEMBER, None)) is not None:
        name, kind, who_id = event.event, "agent", member["agent_id"]
        who = {"agent_id": who_id, "run_id": member["run_id"], "parent_run_id": event.run_id}
    else:
        name = f"Team{event.event}" if team and event.event in AGNO_EVENTS else event.event
        kind, who_id = "team" if team else "agent", event.agent_id
        who = {f"{kind}_id": who_id, "run_id": event.run_id}
    if (display := names.get(who_id)) is not None:
        who[f"{kind}_name"] = display
    common = {"event": name, "created_at": int(event.created_at)} | who
    common["session_id"] = event.session_id
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, name.encode(), encode(common | fields))


def frame(event: RunEvent, team: bool = False, names: Mapping[str, str] = NO_NAMES) -> bytes:
    """The event as sent, formatted once for all of its run's followers here: a stored
    event's (run_id, seq) is that event, always (and `names` are this server's)."""
    key = (event.run_id, event.seq, team)
    if (found := _formatted.get(key)) is None:
        found = _formatted[key] = format_event(event, team, names)
        if len(_formatted) > FRAMES_KEPT:
            del _formatted[next(iter(_formatted))]
    return found


@dataclass(frozen=True)
class EventStream:
    """A handler's answer that is a run's events (validated already: the request was
    good); the app makes it a response with its keep-alive interval."""

    batches: AsyncIterator[list[RunEvent]]
    which: Events = "agno"
    team: bool = False  # a team run's: AgentOS's Team* names
    names: Mapping[str, str] = field(default_factory=dict)  # display names by agent (or team) id

    def response(self, keepalive_seconds: float) -> Stream:
        body: AsyncIterator[Any] = _kept_alive(self._frames(), keepalive_seconds)
        return Stream(body, media_type=MEDIA_TYPE, headers=HEADERS)

    async def _frames(self) -> AsyncIterator[bytes]:
        """A batch's events in one piece: one send, however many events it holds."""
        async for batch in self.batches:
            sent = [
                frame(e, self.team, self.names)
                for e in batch
                if self.which == "all" or e.event in AGNO_EVENTS
            ]
            if sent:
                yield b"".join(sent)


async def _kept_alive(frames: AsyncIterator[bytes], seconds: float) -> AsyncIterator[bytes]:
    """`frames` after a `retry:` line, with a comment whenever none came for `seconds`. The
    next frame is awaited in a task of its own, so that a timeout does not cancel it."""
    yield b"retry: %d\n\n" % RETRY_MS
    upcoming = asyncio.ensure_future(anext(frames))
    try:
        while True:
            done, _ = await asyncio.wait({upcoming}, timeout=seconds)
            if not done:
                yield KEEPALIVE
                continue
            try:
                piece = upcoming.result()
            except StopAsyncIteration:
                return
            yield piece
            upcoming = asyncio.ensure_future(anext(frames))
    finally:
        upcoming.cancel()  # the client left: its follower leaves too
        await asyncio.wait({upcoming})
