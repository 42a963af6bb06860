"""Document bytes, counted from outside the storage: those handed to the database (an
engine event listener sees every statement's parameters) and those it holds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, event, select
from sqlalchemy.ext.asyncio import AsyncEngine

from runpoint.plugins.sql.schema import checkpoints, messages, run_events, runs, sessions


class WrittenDocuments:
    """Counts the bytes of the documents every statement on `engine` writes: a document is
    the only binary parameter."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.bytes = 0
        event.listen(engine.sync_engine, "before_cursor_execute", self._count)

    def _count(self, _conn: Any, _cursor: Any, _sql: str, parameters: Any, *_: Any) -> None:
        self.bytes += sum(len(value) for value in _values(parameters) if _is_document(value))


def _values(parameters: Any) -> list[Any]:
    """Every value among a statement's parameters (nested in rows and arrays)."""
    if isinstance(parameters, dict):
        parameters = list(parameters.values())
    if isinstance(parameters, list | tuple):
        return [value for nested in parameters for value in _values(nested)]
    return [parameters]


def _is_document(value: Any) -> bool:
    return isinstance(value, bytes | memoryview)


DOCUMENTS = (
    sessions.c.data,
    runs.c.data,
    runs.c.state,
    messages.c.data,
    checkpoints.c.data,
    run_events.c.data,
)


async def stored_bytes(engine: AsyncEngine, columns: Sequence[Column[Any]] = DOCUMENTS) -> int:
    """The document bytes the database holds now in `columns` (all by default), as they
    were handed to it (`WrittenDocuments` counts the same bytes): compact JSON, but an
    event batch over 200 bytes deflated (plugins/sql/events.py)."""
    total = 0
    async with engine.connect() as conn:
        for column in columns:
            total += sum(len(data) for data in await conn.scalars(select(column)))
    return total
