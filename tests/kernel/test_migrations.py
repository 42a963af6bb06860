"""Migrations: they agree with the tables, and an older database upgrades losing nothing."""

from __future__ import annotations

import ast
import sys
from typing import Any

import msgspec
from alembic.script import ScriptDirectory
from sqlalchemy import (
    Column,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    insert,
    inspect,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.types import TypeDecorator, TypeEngine

from runpoint.core.sealing import Codec
from runpoint.core.types import (
    Checkpoint,
    KeyClaim,
    Message,
    Run,
    RunStatus,
    Segment,
    Session,
    SessionCheckpoint,
    ToolCall,
    now,
)
from runpoint.facade import ContinueRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.plugins.sql import migrate
from runpoint.plugins.sql.births import births
from runpoint.plugins.sql.schema import metadata
from runpoint.plugins.sql.store import SqlStorage


async def test_migrations_and_tables_agree(database: str) -> None:
    storage = SqlStorage(database)
    await storage.open()
    try:
        assert await migrate.differences(storage.engine) == []
    finally:
        await storage.close()


def test_each_revision_is_its_file_number_and_the_head_the_highest() -> None:
    """The head is read from the file names (alembic is imported only to migrate)."""
    scripts = ScriptDirectory.from_config(migrate.config())
    for script in scripts.walk_revisions():
        assert script.path.rpartition("/")[2].startswith(f"{script.revision}_"), script.path
    assert scripts.get_heads() == [migrate.HEAD]


async def test_a_database_behind_the_head_is_upgraded_when_opened(
    database: str,
) -> None:
    storage = SqlStorage(database)
    try:
        assert await migrate.current(storage.engine) == set()  # new: no revision at all
        await migrate.upgrade(storage.engine, "0008")
        assert await migrate.pending(storage.engine) == [migrate.HEAD]
        await storage.open()
        assert await migrate.current(storage.engine) == {migrate.HEAD}
        assert await migrate.pending(storage.engine) == []
    finally:
        await storage.close()


def test_revisions_import_no_live_code() -> None:
    """A revision creates the same schema forever: it imports alembic, SQLAlchemy and the
    standard library only, never runpoint or pgqueuer, whose later versions would change
    what it creates."""
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
        allowed = {"alembic", "sqlalchemy", *sys.stdlib_module_names}
        assert {m.split(".")[0] for m in modules} <= allowed, revision.name


encode = msgspec.json.encode


class Document(TypeDecorator[bytes]):
    """A document's column as revisions 0001 to 0013 made it: a BLOB, JSONB on PostgreSQL.
    Given its JSON bytes either way (JSONB is handed the values they say, which it encodes
    again; None is NULL, as runpoint wrote it), it reads back as JSONB gives it: those
    values."""

    impl = LargeBinary
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(JSONB(none_as_null=True))
        return dialect.type_descriptor(LargeBinary())

    def process_bind_param(self, value: bytes | None, dialect: Dialect) -> Any:
        if dialect.name == "postgresql" and value is not None:
            return msgspec.json.decode(value)
        return value


# columns added after 0014, which the rows written before it lack
LATER_COLUMNS = {"parent_run_id"}


def before_0014(name: str) -> Table:
    """Table `name` as the revisions before 0014 had it, for inserts of the columns that
    were there: its documents `Document`s."""
    return Table(
        name,
        MetaData(),
        *(
            Column(c.name, Document if isinstance(c.type, LargeBinary) else c.type)
            for c in metadata.tables[name].c
            if c.name not in LATER_COLUMNS
        ),
    )


async def write_before_0014(engine: AsyncEngine, rows: dict[str, list[dict[str, Any]]]) -> None:
    async with engine.begin() as conn:
        for name, given in rows.items():
            rows_then = [{k: v for k, v in r.items() if k not in LATER_COLUMNS} for r in given]
            await conn.execute(insert(before_0014(name)), rows_then)


def plain(value: Any) -> Any:
    """A column's value, a document as the JSON values it says (JSONB gave those back)."""
    return msgspec.json.decode(value) if isinstance(value, bytes) else value


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
# idempotency_keys as revision 0003 made it (0008 widened its strings): no lease
OLD_KEYS = Table(
    "idempotency_keys",
    OLD,
    Column("scope", String(200)),
    Column("key", String(200)),
    Column("fingerprint", String(64)),
    Column("created_at", Float),
    Column("response", Document),
)
SCOPE = "acme create_run travel-agent"
OLD_CHECKPOINTS = Table(
    "checkpoints",
    OLD,
    Column("run_id", String(64)),
    Column("message_index", Integer),
    Column("data", Document),
)


async def test_a_database_from_revision_0001_upgrades_without_losing_a_row(database: str) -> None:
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
        fork = await (
            await rp.continue_run(ContinueRun(run_id="r1", continue_from="last_user"))
        ).result()
        assert fork.forked_from_message_index == 1
        upgraded = await rp.get_session("s1")
        # the old session's event log starts at 0: the fork's messages are its first events
        assert upgraded == msgspec.structs.replace(session, event_seq=upgraded.event_seq)
        assert upgraded.event_seq > 0
        # the session made before teams is the default team's, listed as such
        assert [s.session_id for s in await rp.list_sessions()] == ["s1"]
        assert len(await rp.list_runs("s1")) == 2


async def columns(engine: AsyncEngine) -> dict[str, list[str]]:
    """The columns of every table there is (a later revision's are not there yet)."""

    def inspected(sync: Any) -> dict[str, list[str]]:
        tables = inspect(sync)
        return {t: [c["name"] for c in tables.get_columns(t)] for t in tables.get_table_names()}

    async with engine.connect() as conn:
        return await conn.run_sync(inspected)


async def every_row(engine: AsyncEngine, shape: dict[str, list[str]]) -> dict[str, list[Any]]:
    """The rows of runpoint's tables in `shape`, each of its columns there (a later
    revision may add more), their documents as the values they say (0014 made them bytes
    on PostgreSQL; the key columns that sort the rows come first)."""
    async with engine.connect() as conn:
        return {
            name: sorted(
                tuple(plain(value) for value in row)
                for row in await conn.execute(select(*(metadata.tables[name].c[c] for c in cut)))
            )
            for name, cut in shape.items()
            if name in metadata.tables
        }


async def test_a_database_at_0007_upgrades_without_losing_a_row(database: str) -> None:
    """0008 widens the columns of what comes from outside to TEXT (SQLite copies tables)."""
    storage = SqlStorage(database)
    await migrate.upgrade(storage.engine, "0007")
    # the rows the storage writes, as it wrote them into 0007's tables (never opened:
    # opening upgrades to head)
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
    born = births([source, fork], [run], {"r1": [Message("user", "Paris?")]}, Codec())
    # the call's intent, then how it ended
    result = Message("tool", "2.1M", tool_call_id="call_1", tool_name="get_population")
    call = {"run_id": "r1", "tool_call_id": "call_1", "started_at": 1.0, "result": encode(result)}
    checkpoint = SessionCheckpoint("c1", "s1", 1, label="before")
    await write_before_0014(
        storage.engine,
        {
            "sessions": born.sessions,
            "runs": born.runs,
            "messages": born.messages,
            "tool_calls": [call],
            "session_checkpoints": [
                {"checkpoint_id": "c1", "session_id": "s1", "data": encode(checkpoint)}
            ],
        },
    )
    # as runpoint claimed keys then: no lease (k2's request died, unanswered)
    async with storage.engine.begin() as conn:
        await conn.execute(
            insert(OLD_KEYS),
            [
                {"scope": SCOPE, "key": k, "fingerprint": "f" * 64, "created_at": 1.0}
                | {"response": answer}
                for k, answer in [("k1", b'"r1"'), ("k2", None)]
            ],
        )
    shape = await columns(storage.engine)
    before = await every_row(storage.engine, shape)
    tables = ("sessions", "runs", "messages", "tool_calls", "idempotency_keys")
    assert all(before[t] for t in tables)

    await migrate.upgrade(storage.engine)
    try:
        assert await every_row(storage.engine, shape) == before
        assert await migrate.differences(storage.engine) == []
        # k1's answer stands; k2's claim, made with no lease, has run out: a retry takes it
        claim, fingerprint, until = KeyClaim(SCOPE, "k1", "retry"), "f" * 64, now() + 60
        assert await storage.claim_key(claim, fingerprint, until) == (fingerprint, "r1")
        claim = KeyClaim(SCOPE, "k2", "retry")
        assert await storage.claim_key(claim, fingerprint, until) is None
    finally:
        await storage.close()


def as_0013_kept(document: bytes) -> bytes:
    """A document as 0013's storage kept it: with a U+0000 (JSON's escape of it in its
    text), which JSONB cannot hold, as a JSON array of one string, its JSON text."""
    return encode((document.decode(),)) if b"\\u0000" in document else document


async def test_a_database_at_0013_upgrades_with_its_documents_whole(database: str) -> None:
    """0014 makes the documents bytes on PostgreSQL; one 0013 kept wrapped reads back as
    it was, as does a plain one, on both databases."""
    nul = "nul:\x00."
    said = [Message("user", "Paris?"), Message("assistant", nul)]
    run = Run(
        run_id="r1",
        session_id="s1",
        agent_id="travel-agent",
        status=RunStatus.COMPLETED,
        input="Paris?",
        content=nul,
        segments=[Segment("r1", 0)],
        message_count=2,
    )
    born = births([Session("s1", "travel-agent")], [run], {"r1": said}, Codec())
    for row in born.runs + born.messages:
        row["data"] = as_0013_kept(row["data"])
    for row in born.runs:
        row["state"] = as_0013_kept(row["state"])
    kept = [row[c] for row in born.runs for c in ("data", "state")]
    kept += [row["data"] for row in born.messages]
    # the run's documents (its content) and the assistant's message wrapped, the user's not
    assert [document.startswith(b"[") for document in kept] == [True, True, False, True]
    storage = SqlStorage(database)
    await migrate.upgrade(storage.engine, "0013")
    await write_before_0014(
        storage.engine, {"sessions": born.sessions, "runs": born.runs, "messages": born.messages}
    )
    await storage.close()

    async with Runpoint(agents, database=database) as rp:  # opening upgrades to head
        detail = await rp.get_run("r1", session_id="s1")
        assert detail.messages == said
        assert (detail.run.input, detail.run.content) == ("Paris?", nul)
        assert detail.run.status is RunStatus.COMPLETED
    storage = SqlStorage(database)
    try:
        assert await migrate.differences(storage.engine) == []  # BYTEA, as schema.py says
    finally:
        await storage.close()
