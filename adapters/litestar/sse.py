"""A run's events as Server-Sent Events, in Agno's format: `event: <Name>` and one line of
compact JSON holding the common fields with the event's own fields beside them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from litestar.response import Stream

from runpoint.execution import RunHandle
from runpoint.types import RunEvent

from .wire import encode

MEDIA_TYPE = "text/event-stream"  # Litestar adds "; charset=utf-8"
# proxies must pass events through as they come
HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def format_event(event: RunEvent) -> bytes:
    common = {
        "event": event.event,
        "created_at": int(event.created_at),
        "agent_id": event.agent_id,
        "run_id": event.run_id,
        "session_id": event.session_id,
    }
    return b"event: %s\ndata: %s\n\n" % (event.event.encode(), encode(common | event.data))


async def _events(handle: RunHandle) -> AsyncIterator[bytes]:
    async for event in handle.events():
        yield format_event(event)


def stream(handle: RunHandle) -> Stream:
    """The response for a run that was started (and so validated) already."""
    events: AsyncIterator[Any] = _events(handle)
    return Stream(events, media_type=MEDIA_TYPE, headers=HEADERS)
