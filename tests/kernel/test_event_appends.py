"""The event appends of a process's runs that come together are written together: one
transaction (one statement on PostgreSQL) for all of them, each run's rows only while its
writer's revision is the run's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from sqlalchemy import event

from runpoint.conformance import build
from runpoint.conformance.events import events
from runpoint.host import PluginHost
from runpoint.plugins.sql.store import SqlStorage


@pytest.fixture
async def storage(database: str) -> AsyncIterator[SqlStorage]:
    opened = PluginHost().storage(database)
    assert isinstance(opened, SqlStorage)
    await opened.open()
    yield opened
    await opened.close()


def count_writes(storage: SqlStorage) -> list[str]:
    """The write transactions begun on `storage`'s engine: SQLite's BEGIN, PostgreSQL's
    statements that write the event log (each a transaction of its own)."""
    begun: list[str] = []

    def seen(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        if sql.startswith("BEGIN") or (sql.startswith("WITH") and "run_events" in sql):
            begun.append(sql)

    event.listen(storage.engine.sync_engine, "before_cursor_execute", seen)
    return begun


async def test_appends_that_come_together_are_one_write(storage: SqlStorage) -> None:
    started = [(await build.started(storage))[1] for _ in range(5)]
    stale = msgspec.structs.replace(started[2])
    await storage.save(started[2], [], None)  # another writer moved this run on
    writes = count_writes(storage)

    appends = [storage.append_events(r, events(r, 1, 2)) for r in started]
    appends.append(storage.append_events(stale, events(stale, 3, 1)))
    assert await asyncio.gather(*appends) == [True] * 5 + [False]

    assert len(writes) == 1
    for run in started:
        assert await storage.read_events(run, 0, 10) == events(run, 1, 2)
    # and alone, an append is a write of its own, as soon as it comes
    assert await storage.append_events(started[0], events(started[0], 3, 1))
    assert len(writes) == 2
