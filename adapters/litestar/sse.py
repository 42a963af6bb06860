"""A run's events as Server-Sent Events, in Agno's format: `event: <Name>` and one line of
compact JSON holding the common fields with the event's own fields beside them.

Agno's client logs an error for every event it does not know, so runpoint's own events
(CheckpointCreated, ToolCallDelta) go only to clients that ask for every event."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import msgspec
from litestar.response import Stream

from runpoint.execution import RunHandle
from runpoint.types import RunEvent, Usage

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


def format_event(event: RunEvent) -> bytes:
    common = {
        "event": event.event,
        "created_at": int(event.created_at),
        "agent_id": event.agent_id,
        "run_id": event.run_id,
        "session_id": event.session_id,
    }
    return b"event: %s\ndata: %s\n\n" % (event.event.encode(), encode(common | _fields(event)))


async def _events(handle: RunHandle, events: Events) -> AsyncIterator[bytes]:
    async for event in handle.events():
        if events == "all" or event.event in AGNO_EVENTS:
            yield format_event(event)


def stream(handle: RunHandle, events: Events = "agno") -> Stream:
    """The response for a run that was started (and so validated) already."""
    body: AsyncIterator[Any] = _events(handle, events)
    return Stream(body, media_type=MEDIA_TYPE, headers=HEADERS)
