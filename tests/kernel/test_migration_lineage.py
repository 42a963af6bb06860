"""Migration 0015 fills the lineage of the forks a database holds already; an older SQLite
file is made to return free pages to the file system (vacuumed once), and sweeps do."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import insert

from runpoint.core.sealing import Codec
from runpoint.core.types import Message, Run, RunStatus, Segment, Session
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.plugins.sql import migrate
from runpoint.plugins.sql.births import births
from runpoint.plugins.sql.schema import messages, runs, sessions
from runpoint.plugins.sql.store import SqlStorage
from runpoint.seams.retention import Retention


@pytest.mark.parametrize("database", ["sqlite", "postgresql"], indirect=True)
async def test_0015_keeps_what_a_fork_made_before_it_reads(database: str) -> None:
    said = [Message("user", f"message {i}") for i in range(4)]
    source = Run("a", "s", "travel-agent", RunStatus.COMPLETED, segments=[Segment("a", 0)])
    source.message_count = 4
    fork = Run("b", "s", "travel-agent", RunStatus.COMPLETED, message_count=3)
    fork.segments = [Segment("a", 0, 2), Segment("b", 2)]
    born = births(
        [Session("s", "travel-agent")], [source, fork], {"a": said, "b": said[:1]}, Codec()
    )
    storage = SqlStorage(database)
    await migrate.upgrade(storage.engine, "0014")
    async with storage.engine.begin() as conn:
        for table, rows in zip((sessions, runs, messages), born, strict=False):
            # as 0014 had them (0019 added parent_run_id)
            rows = [{k: v for k, v in r.items() if k != "parent_run_id"} for r in rows]
            await conn.execute(insert(table), rows)
    await storage.close()
    storage = SqlStorage(database)
    await storage.open()  # upgrades to the head
    try:
        removed = await storage.remove_runs(["a"])
        assert (removed.runs, removed.messages) == (1, 2), "the fork's 0 and 1 stay"
        assert await storage.read_messages(fork.segments, 3) == [*said[:2], said[0]]
    finally:
        await storage.close()


async def test_an_older_sqlite_file_returns_free_pages_once_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as old:
        old.execute("CREATE TABLE kept (x)")
    storage = SqlStorage(f"sqlite:///{path}")
    await storage.open()
    await storage.close()
    with contextlib.closing(sqlite3.connect(path)) as opened:
        assert opened.execute("PRAGMA auto_vacuum").fetchone() == (2,)  # INCREMENTAL
        assert opened.execute("SELECT count(*) FROM kept").fetchone() == (0,)


async def test_a_sweep_returns_the_pages_it_freed_to_the_file_system(tmp_path: Path) -> None:
    path = tmp_path / "runpoint.db"
    async with Runpoint(agents, database=f"sqlite:///{path}", retention=Retention(runs=0)) as rp:
        for _ in range(20):
            await (
                await rp.create_run(
                    CreateRun(agent_id="travel-agent", message="Paris, Tokyo and Lagos " * 50)
                )
            ).result()
        full = pages(path)
        removed = await rp.sweeper.sweep_all()
    assert removed.runs == 20 and removed.reclaimed > 0
    assert pages(path) * 4096 <= full * 4096 - removed.reclaimed
    assert path.stat().st_size == pages(path) * 4096, "the WAL was copied back into the file"


def pages(path: Path) -> int:
    """The database's size in pages, as it reads through its WAL."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA page_size").fetchone() == (4096,)
        found: int = conn.execute("PRAGMA page_count").fetchone()[0]
    return found
