"""Writes of a process's runs that come together are committed together: event appends in
one transaction (one statement on PostgreSQL), each run's rows only while its writer's
revision is the run's; on SQLite, boundaries too, each in a savepoint of its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
from sqlalchemy import event, text

from runpoint.conformance import build
from runpoint.conformance.events import events
from runpoint.errors import Conflict
from runpoint.host import PluginHost
from runpoint.plugins.sql.sqlite import Sqlite
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


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_sqlite_boundaries_that_come_together_share_a_commit_and_fail_alone(
    storage: SqlStorage,
) -> None:
    started = [(await build.started(storage))[1] for _ in range(4)]
    stale = msgspec.structs.replace(started[1])
    await storage.save(started[1], [], None)  # another writer moved this run on
    writes = count_writes(storage)

    messages = [build.messages(2, label=run.run_id) for run in started]
    for run in started:
        run.message_count += 2
    saves = [storage.save(r, m, None) for r, m in zip(started, messages, strict=True)]
    saves.insert(2, storage.save(stale, build.messages(1, "stale"), None))
    answers = await asyncio.gather(*saves, return_exceptions=True)

    assert [type(a) for a in answers] == [type(None)] * 2 + [Conflict] + [type(None)] * 2
    assert len(writes) == 1
    for run, written in zip(started, messages, strict=True):
        assert await storage.read_messages(run.segments, run.message_count) == written
        assert (await storage.get_run(run.run_id)).revision == run.revision  # type: ignore[union-attr]
    # the refused boundary left nothing: the next write of its run goes on from there
    await storage.save(started[1], [], None)


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_sqlite_a_write_that_gives_up_joining_leaves_its_group_committed(
    storage: SqlStorage,
) -> None:
    db = storage.db
    assert isinstance(db, Sqlite)
    inside, go_on = asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with db.single_write() as conn:
            inside.set()
            await go_on.wait()
            await conn.exec_driver_sql("INSERT INTO secrets (name, value) VALUES ('a', x'00')")

    async def second() -> None:
        async with db.single_write():
            raise AssertionError("it gave up before its turn")

    written = asyncio.create_task(first())
    await inside.wait()
    joining = asyncio.create_task(second())
    await asyncio.sleep(0.01)  # waiting for its turn when the first's body ends
    release = db._turn.release

    def gives_up() -> None:  # the moment the first's body ends, the second gives up
        release()
        joining.cancel()

    db._turn.release = gives_up  # type: ignore[method-assign]
    go_on.set()
    await asyncio.wait_for(written, 5)  # committed without the one that gave up
    assert joining.cancelled()
    async with db.write() as conn:  # and the database's writer is free
        assert await conn.scalar(text("SELECT count(*) FROM secrets WHERE name = 'a'")) == 1
