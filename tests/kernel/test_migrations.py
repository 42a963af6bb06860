"""Migrations: they agree with the tables, and an older database upgrades losing nothing."""

from __future__ import annotations

import ast
from typing import Any

import msgspec
from sqlalchemy import Column, Float, Integer, MetaData, String, Table, insert, inspect, select
from sqlalchemy.ext.asyncio import AsyncEngine

from runpoint.plugins.demo import agents
from runpoint.plugins.sql import SqlStorage, migrate
from runpoint.plugins.sql.schema import Document, metadata
from runpoint.services import Runpoint
from runpoint.types import (
    Checkpoint,
    Message,
    Run,
    RunStatus,
    Segment,
    Session,
    SessionCheckpoint,
    ToolCall,
)


async def test_migrations_and_tables_agree(database: str) -> None:
    storage = SqlStorage(database)
    await storage.open()
    try:
        assert await migrate.differences(storage.engine) == []
    finally:
        await storage.close()


def test_revisions_import_no_live_code() -> None:
    """A revision creates the same schema forever: it imports alembic and SQLAlchemy only,
    never runpoint or pgqueuer, whose later versions would change what it creates."""
    for revision in sorted((migrate.SCRIPTS / "versions").glob("0*.py")):
        tree = ast.parse(revision.read_text())
        modules = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        modules |= {
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        }
        assert {m.split(".")[0] for m in modules} <= {"alembic", "sqlalchemy"}, revision.name


# The tables as revision 0001 made them: one document per row, nothing else queryable.
OLD = MetaData()
OLD_SESSIONS = Table(
    "sessions",
    OLD,
    Column("session_id", String(64)),
    Column("agent_id", String(200)),
    Column("created_at", Float),
    Column("data", Document),
)
OLD_RUNS = Table(
    "runs",
    OLD,
    Column("run_id", String(64)),
    Column("session_id", String(64)),
    Column("data", Document),
)
OLD_MESSAGES = Table(
    "messages", OLD, Column("run_id", String(64)), Column("idx", Integer), Column("data", Document)
)
OLD_CHECKPOINTS = Table(
    "checkpoints",
    OLD,
    Column("run_id", String(64)),
    Column("message_index", Integer),
    Column("data", Document),
)


async def test_a_database_from_revision_0001_upgrades_without_losing_a_row(database: str) -> None:
    encode = msgspec.json.encode
    session = Session(session_id="s1", agent_id="travel-agent")
    transcript = [
        Message(role="user", content="Paris?"),
        Message(role="assistant", tool_calls=[ToolCall("c1", "get_population", {"city": "Paris"})]),
        Message(role="tool", content="2.1M", tool_call_id="c1", tool_name="get_population"),
        Message(role="assistant", content="Paris has 2.1M people."),
    ]
    run = Run(
        run_id="r1",
        session_id="s1",
        agent_id="travel-agent",
        status=RunStatus.COMPLETED,
        input="Paris?",
        content="Paris has 2.1M people.",
        segments=[Segment("r1", 0)],
        message_count=4,
        last_checkpoint_at_message_index=4,
    )
    checkpoints = [
        Checkpoint("k3", "r1", "s1", 3, "checkpoint", "tool-batch", RunStatus.RUNNING),
        Checkpoint("k4", "r1", "s1", 4, "end", "tool-batch", RunStatus.COMPLETED),
    ]
    storage = SqlStorage(database)
    await migrate.upgrade(storage.engine, "0001")
    async with storage.engine.begin() as conn:
        await conn.execute(
            insert(OLD_SESSIONS),
            [
                {
                    "session_id": "s1",
                    "agent_id": "travel-agent",
                    "created_at": 1.0,
                    "data": encode(session),
                }
            ],
        )
        await conn.execute(
            insert(OLD_RUNS), [{"run_id": "r1", "session_id": "s1", "data": encode(run)}]
        )
        await conn.execute(
            insert(OLD_MESSAGES),
            [{"run_id": "r1", "idx": i, "data": encode(m)} for i, m in enumerate(transcript)],
        )
        await conn.execute(
            insert(OLD_CHECKPOINTS),
            [
                {"run_id": "r1", "message_index": c.message_index, "data": encode(c)}
                for c in checkpoints
            ],
        )
    await storage.close()

    async with Runpoint(agents, database=database) as rp:  # opening upgrades to head
        detail = await rp.get_run("r1", session_id="s1")
        assert detail.messages == transcript
        assert detail.run.status is RunStatus.COMPLETED
        assert detail.run.content == "Paris has 2.1M people."
        _, timeline = await rp.timeline("r1")
        assert timeline == checkpoints
        # the new columns were filled: roles find boundaries, statuses find runs in flight
        fork = await (await rp.continue_run("r1", continue_from="last_user")).result()
        assert fork.forked_from_message_index == 1
        upgraded = await rp.get_session("s1")
        # the old session's event log starts at 0: the fork's messages are its first events
        assert upgraded == msgspec.structs.replace(session, event_seq=upgraded.event_seq)
        assert upgraded.event_seq > 0
        # the session made before teams is the default team's, listed as such
        assert [s.session_id for s in await rp.list_sessions()] == ["s1"]
        assert len(await rp.list_runs("s1")) == 2


async def every_row(engine: AsyncEngine) -> dict[str, list[Any]]:
    """The rows of every table there is (a later revision's are not there yet)."""
    async with engine.connect() as conn:
        there = set(await conn.run_sync(lambda sync: inspect(sync).get_table_names()))
        return {
            table.name: sorted(tuple(row) for row in await conn.execute(select(table)))
            for table in metadata.sorted_tables
            if table.name in there
        }


async def test_a_database_at_0007_upgrades_without_losing_a_row(database: str) -> None:
    """0008 widens the columns of what comes from outside to TEXT (SQLite copies tables)."""
    storage = SqlStorage(database)
    await migrate.upgrade(storage.engine, "0007")
    # written through the storage itself, never opened (opening upgrades to head)
    source = Session(session_id="s1", agent_id="travel-agent", team_id="acme")
    fork = Session("s2", "travel-agent", "acme", forked_from_session_id="s1")
    run = Run(
        run_id="r1",
        session_id="s1",
        agent_id="travel-agent",
        status=RunStatus.RUNNING,
        segments=[Segment("r1", 0)],
        message_count=1,
    )
    await storage.create_sessions([source, fork], [run], {"r1": [Message("user", "Paris?")]})
    await storage.save(run, [], None, intents=["call_1"])  # the call's intent
    result = Message("tool", "2.1M", tool_call_id="call_1", tool_name="get_population")
    await storage.record_tool_result("r1", result)
    assert await storage.claim_key("acme create_run travel-agent", "k1", "f" * 64) is None
    await storage.answer_key("acme create_run travel-agent", "k1", "r1")
    await storage.add_session_checkpoint(SessionCheckpoint("c1", "s1", 1, label="before"))
    before = await every_row(storage.engine)
    assert all(before[t] for t in ("sessions", "runs", "messages", "tool_calls"))

    await migrate.upgrade(storage.engine)
    try:
        after = await every_row(storage.engine)
        assert {table: rows for table, rows in after.items() if table in before} == before
        assert await migrate.differences(storage.engine) == []
    finally:
        await storage.close()
