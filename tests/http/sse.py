"""Server-Sent Events as runpoint sends them, read strictly: a `retry:` block first, then
events of three lines (`id:`, `event:`, `data:`), with keep-alive comments between them."""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec


class Event(NamedTuple):
    id: int
    name: str
    data: dict[str, Any]
    text: str  # as sent, from `id:` to the end of `data:`


def parse(text: str) -> list[Event]:
    """The events of a stream's text (the whole of it, or what came before it was cut off:
    a block not ended yet is left out)."""
    blocks = text.split("\n\n")[:-1]
    assert blocks and blocks[0] == "retry: 1000", blocks[:1]
    parsed = []
    for block in blocks[1:]:
        if block == ": keep-alive":
            continue
        id_line, event_line, data_line = block.split("\n")
        name = event_line.removeprefix("event: ")
        data = msgspec.json.decode(data_line.removeprefix("data: "))
        assert data["event"] == name and isinstance(data["created_at"], int)
        parsed.append(Event(int(id_line.removeprefix("id: ")), name, data, block))
    return parsed
