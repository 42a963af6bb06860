"""The SQL storage's reads: each one statement on the driver, taking no connection from
the engine's pool (whose checkout costs more CPU than the read: plugins/sql/readers.py);
on PostgreSQL, on connections of their own, which outlive the server closing them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import event

from runpoint.conformance import build
from runpoint.plugins.sql.readers import SIZE
from runpoint.plugins.sql.store import SqlStorage
from tests.postgres import fetch_value


async def test_a_read_takes_no_connection_from_the_engines_pool(storage: SqlStorage) -> None:
    session, run = await build.started(storage, build.messages(2))
    checkouts: list[Any] = []
    event.listen(storage.engine.sync_engine.pool, "checkout", lambda *a: checkouts.append(a))

    assert await storage.get_run(run.run_id) == run
    assert [r.run_id for r in await storage.list_runs(session.session_id)] == [run.run_id]
    assert len(await build.transcript(storage, run)) == 2
    assert checkouts == []


async def test_more_reads_at_once_than_connections_for_them_all_answer(
    storage: SqlStorage,
) -> None:
    _, run = await build.started(storage)
    found = await asyncio.gather(*(storage.get_run(run.run_id) for _ in range(4 * SIZE)))
    assert found == [run] * (4 * SIZE)


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
async def test_on_postgresql_reads_go_on_after_the_server_closed_their_connections(
    storage: SqlStorage, database: str
) -> None:
    _, run = await build.started(storage)
    await asyncio.gather(*(storage.get_run(run.run_id) for _ in range(3)))  # 3 connections

    closed = await fetch_value(  # each once its backend has ended (5 s at most)
        database,
        "SELECT count(pg_terminate_backend(pid, 5000)) FROM pg_stat_activity"
        " WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    assert closed >= 3
    await asyncio.sleep(0.05)  # the ends reach this process

    assert [await storage.get_run(run.run_id) for _ in range(4)] == [run] * 4
