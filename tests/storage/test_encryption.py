"""Encryption at rest: what users, tools and models wrote is sealed in the database, bound
to its row; a row that does not open is refused by name, never served as valid."""

from __future__ import annotations

import base64
import glob
import os
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from runpoint import hookimpl
from runpoint.core.errors import ConfigurationError, Unreadable
from runpoint.core.keyring import Keyring, key_id_of
from runpoint.core.schedule import Schedule
from runpoint.core.types import Approval, ApprovalQuery, RunStatus, Segment, ToolCall, new_id, now
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.memory import MemoryStorage
from runpoint.plugins.scripted import ScriptedModel, call_id
from runpoint.plugins.sql import encryption
from runpoint.plugins.sql.sealing import SealedColumns
from runpoint.plugins.sql.store import SqlStorage
from runpoint.seams.agent import Agent, tool
from runpoint.seams.host import PluginHost
from runpoint.seams.model import ModelRequest, ModelResponse
from runpoint.seams.storage import Encrypted

SECRETS = (
    "TYPED-BY-A-USER",
    "A-TOOL-SAID-THIS",
    "THE-MODEL-ANSWERED",
    "look-up-argument",
    "A-SCHEDULE-SAYS-THIS",
)
OLD, NEW = os.urandom(32), os.urandom(32)


def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"A-TOOL-SAID-THIS about {topic}"


def respond(request: ModelRequest) -> ModelResponse:
    if request.messages[-1].role == "user":
        return ModelResponse(
            tool_calls=[ToolCall(call_id(request), "lookup", {"topic": SECRETS[3]})]
        )
    return ModelResponse(content="THE-MODEL-ANSWERED")


AGENTS = [
    Agent(id="a", model=ScriptedModel(respond), tools=[lookup]),
    # its call of `lookup` waits for a person: an approval, holding the call's arguments
    Agent(
        id="asks", model=ScriptedModel(respond), tools=[tool(requires_confirmation=True)(lookup)]
    ),
]


def keyring(*keys: tuple[str, bytes]) -> Keyring:
    return Keyring(dict(keys or [("k1", OLD)]))


async def a_run(rp: Runpoint) -> str:
    run = await (await rp.create_run(CreateRun(agent_id="a", message=SECRETS[0]))).result()
    assert run.status is RunStatus.COMPLETED
    return run.run_id


async def an_approval(rp: Runpoint) -> Approval:
    run = await (await rp.create_run(CreateRun(agent_id="asks", message=SECRETS[0]))).result()
    assert run.status is RunStatus.PAUSED
    [approval], _ = await rp.approvals.list(
        ApprovalQuery(team_id="", run_id=run.run_id), limit=1, offset=0
    )
    return approval


async def a_schedule(rp: Runpoint, agent_id: str = "a") -> str:
    """A schedule firing every second (in a `Runpoint` that does not fire them)."""
    every = Schedule(
        schedule_id=new_id(),
        name="s",
        agent_id=agent_id,
        message=SECRETS[4],
        cron_expr="* * * * * *",
    )
    return (await rp.schedules.create(every)).schedule_id


async def stored_bytes(database: str) -> bytes:
    """Every byte the database keeps: the SQLite file (and its WAL), or each row of
    PostgreSQL's tables as the server reads it."""
    if database.startswith("sqlite"):
        path = make_url(database).database or ""
        return b"".join(Path(p).read_bytes() for p in glob.glob(f"{path}*"))  # noqa: ASYNC240
    engine = create_async_engine(async_url(database))
    found = []
    async with engine.connect() as conn:
        tables = await conn.scalars(
            text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        )
        for table in tables.all():
            rows = await conn.execute(text(f'SELECT t::text FROM "{table}" t'))
            found += [row[0].encode() for row in rows]
    await engine.dispose()
    return b"\n".join(found)


def async_url(database: str) -> str:
    """The URL of `database` with its async driver."""
    return database.replace("postgresql://", "postgresql+asyncpg://").replace(
        "sqlite://", "sqlite+aiosqlite://"
    )


def holds(raw: bytes, said: str) -> bool:
    """Whether `said` is in `raw`, as itself or as PostgreSQL prints a BYTEA (hex)."""
    return said.encode() in raw or said.encode().hex().encode() in raw


async def swap(database: str, table: str, column: str, where: str, a: object, b: object) -> None:
    """Exchange the stored `column` of two rows of `table`, those `where` (with `:k`) finds
    for `a` and `b`."""
    engine = create_async_engine(async_url(database))
    async with engine.begin() as conn:
        read = text(f"SELECT {column} FROM {table} WHERE {where}")
        first = (await conn.execute(read, {"k": a})).scalar_one()
        second = (await conn.execute(read, {"k": b})).scalar_one()
        write = text(f"UPDATE {table} SET {column} = :v WHERE {where}")
        await conn.execute(write, {"v": second, "k": a})
        await conn.execute(write, {"v": first, "k": b})
    await engine.dispose()


async def test_the_database_holds_none_of_a_runs_text(database: str) -> None:
    async with Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as rp:
        run_id = await a_run(rp)
        run = await rp.get_run(run_id)
        fork = await rp.continue_run(
            ContinueRun(run_id=run_id, continue_from=2, input="TYPED-BY-A-USER again")
        )
        forked = await fork.result()
        checkpoint = await rp.session_checkpoints.create(run.run.session_id)
        # what was sealed reads back whole: the run, its fork's inherited rows, its events
        assert run.run.content == "THE-MODEL-ANSWERED"
        assert run.messages[0].content == "TYPED-BY-A-USER"
        fork_detail = await rp.get_run(forked.run_id)
        assert fork_detail.messages[0].content == "TYPED-BY-A-USER"
        assert forked.segments[0].run_id == run_id  # its first message is the source's row
        calls = fork_detail.messages[2].tool_calls or []
        assert calls[0].arguments == {"topic": SECRETS[3]}
        _, timeline = await rp.timeline(run_id)
        assert timeline[-1].message_preview == "THE-MODEL-ANSWERED"
        snapshot = await rp.snapshot(run_id, 3)
        assert snapshot.detail.messages[2].content == "A-TOOL-SAID-THIS about look-up-argument"
        assert await rp.storage.read_events(run.run, 0, 100)
        assert await rp.storage.session_capture(checkpoint.checkpoint_id) is not None
        approval = await an_approval(rp)
        assert (await rp.approvals.get(approval.id)).calls[0].tool_args == {"topic": SECRETS[3]}
        assert (await rp.schedules.get(await a_schedule(rp))).message == SECRETS[4]
    raw = await stored_bytes(database)
    assert run_id.encode() in raw  # ids stay in the clear
    for said in SECRETS:
        assert not holds(raw, said), said


async def test_without_the_keyring_nothing_changes(database: str) -> None:
    async with Runpoint(AGENTS, database=database) as rp:
        await a_run(rp)
    assert holds(await stored_bytes(database), SECRETS[0])


async def test_a_ciphertext_moved_to_another_row_fails_and_the_others_serve(
    database: str,
) -> None:
    async with Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as rp:
        first, second, third = await a_run(rp), await a_run(rp), await a_run(rp)
        schedules = [await a_schedule(rp) for _ in range(3)]
    await swap(database, "runs", "state", "run_id = :k", first, second)
    await swap(database, "messages", "data", f"run_id = '{first}' AND idx = :k", 0, 3)
    await swap(database, "schedules", "data", "schedule_id = :k", *schedules[:2])
    async with Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as rp:
        swapped = rf"schedules\({schedules[0]}\).data cannot be read: failed auth"
        with pytest.raises(Unreadable, match=swapped):
            await rp.schedules.get(schedules[0])
        # the firing loop goes on past them
        due = await rp.storage.claim_due(now() + 60, 10, now() + 90)
        assert [s.schedule_id for s in due] == schedules[2:]
        with pytest.raises(Unreadable) as refused:
            await rp.get_run(first)
        assert refused.value.row == f"runs({first}).state"
        assert "failed authentication" in str(refused.value)
        assert SECRETS[2] not in str(refused.value)
        swapped = rf"messages\({first}, 0\).data cannot be read: failed auth"
        with pytest.raises(Unreadable, match=swapped):
            await rp.storage.read_messages([Segment(first, 0)], 4)
        # the rows not swapped still serve
        assert len(await rp.storage.read_messages([Segment(first, 1)], 3)) == 2
        assert (await rp.storage.read_messages([Segment(second, 0)], 4))[0].content == SECRETS[0]
        # the background scans go on past them (retention, the lease watch)
        finished, _ = await rp.storage.finished_runs(0, 10)
        assert [r.run_id for r in finished] == [third]


async def test_rows_in_the_clear_are_refused_once_encryption_is_done(database: str) -> None:
    async with Runpoint(AGENTS, database=database) as rp:
        clear = await a_run(rp)
    async with Runpoint(AGENTS, database=database, keyring=keyring()) as rp:
        # the first opening with a keyring: the rows in the clear serve until encrypted
        assert (await rp.get_run(clear)).run.content == SECRETS[2]
        sealed = await a_run(rp)
        storage = rp.storage
        assert isinstance(storage, Encrypted)
        listed = (await storage.reseal(encrypt=False, check=True, batch=2)).problems
        assert f"runs({clear}).data: in the clear" in listed
        assert not any(sealed in row for row in listed)
        done = await storage.reseal(encrypt=True, check=False, batch=2)
        assert done.problems == [] and done.resealed == len(listed)
        assert (await storage.reseal(encrypt=False, check=True, batch=2)).problems == []
    raw = await stored_bytes(database)
    assert not holds(raw, SECRETS[0])
    async with Runpoint(AGENTS, database=database, keyring=keyring()) as rp:
        assert (await rp.get_run(clear)).run.content == SECRETS[2]
        assert (await rp.get_run(sealed)).run.content == SECRETS[2]


async def test_a_row_a_writer_rewrote_during_encryption_stands(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`reseal` writes a page's rows in one statement, each only if it still holds what was
    read: a row a server rewrote in between keeps the server's document, uncounted."""
    async with Runpoint(AGENTS, database=database) as rp:
        clear = await a_run(rp)
    async with Runpoint(AGENTS, database=database, keyring=keyring()) as rp:
        storage = rp.storage
        assert isinstance(storage, SqlStorage)
        codec, reseal = storage.db.codec, encryption._reseal
        written: list[bytes] = []
        team = (await rp.get_run(clear)).run.team_id

        async def meanwhile(
            conn: AsyncConnection, sealed: SealedColumns, column: str, rows: Any
        ) -> int:
            if sealed.table == "messages" and not written:  # a server seals row 0 anew first
                run, i = rows[0]["k0"], rows[0]["k1"]
                document = codec.open(rows[0]["new"], "messages", "data", run, i)
                written.append(codec.seal(document, "messages", "data", run, i, team=team))
                update = "UPDATE messages SET data = :d WHERE run_id = :r AND idx = :i"
                await conn.execute(text(update), {"d": written[0], "r": run, "i": i})
            return await reseal(conn, sealed, column, rows)

        monkeypatch.setattr(encryption, "_reseal", meanwhile)
        monkeypatch.setattr(encryption, "VALUES_ROWS", 3)  # PostgreSQL's pages in pieces
        listed = (await storage.reseal(encrypt=False, check=True, batch=100)).problems
        done = await storage.reseal(encrypt=True, check=False, batch=100)
        assert done.problems == [] and done.resealed == len(listed) - 1
        read = text("SELECT data FROM messages WHERE run_id = :r AND idx = 0")
        async with storage.db.engine.connect() as conn:
            assert (await conn.execute(read, {"r": clear})).scalar_one() == written[0]
        assert (await storage.reseal(encrypt=False, check=True, batch=100)).problems == []
        assert (await rp.get_run(clear)).messages[0].content == SECRETS[0]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("k1 " + base64.b64encode(b"short").decode(), "is 5 bytes; AES-256 keys are 32"),
        ("k1 not-base64!", "line 1: want 'id base64-key'"),
        ("# nothing\n", "holds no key"),
    ],
)
def test_a_bad_keyring_file_is_one_clear_line(
    database: str, tmp_path: Path, content: str, said: str
) -> None:
    path = tmp_path / "keys"
    path.write_text(content)
    with pytest.raises(ConfigurationError, match=said):
        Keyring.from_file(str(path))
    with pytest.raises(ConfigurationError, match="cannot read it"):
        Keyring.from_file(str(tmp_path / "missing"))


class Kms:
    """A plugin handing out keys, as a KMS would."""

    def __init__(self, keys: dict[str, bytes]) -> None:
        self.keys = keys

    @hookimpl
    def runpoint_encryption_keys(self) -> dict[str, bytes]:
        return self.keys


class OtherKms(Kms):
    """A second one (a plugin's name is its class's)."""


def test_a_plugin_supplies_the_keyring_unless_a_file_is_given(tmp_path: Path) -> None:
    assert PluginHost().keyring() is None
    from_kms = PluginHost([Kms({"kms-2": NEW, "kms-1": OLD})]).keyring()
    assert from_kms is not None and from_kms.current == "kms-2"
    sealed = from_kms.seal(b"{}", b"row")
    assert Keyring({"kms-1": OLD, "kms-2": NEW}).open(sealed, b"row") == b"{}"
    path = tmp_path / "keys"
    path.write_text(f"file-1 {base64.b64encode(OLD).decode()}\n")
    from_file = PluginHost([Kms({"kms-2": NEW})]).keyring(str(path))
    assert from_file is not None and from_file.current == "file-1"
    with pytest.raises(ConfigurationError, match="both register the encryption key 'k'"):
        PluginHost([Kms({"k": OLD}), OtherKms({"k": NEW})])


class Unsealed(MemoryStorage):
    """A backend that keeps its documents but cannot be given a codec."""

    encrypt_with = None  # type: ignore[assignment]


async def test_a_backend_that_cannot_encrypt_is_refused_a_keyring() -> None:
    with pytest.raises(ConfigurationError, match="Unsealed cannot encrypt"):
        Runpoint(AGENTS, storage=Unsealed(), keyring=keyring())


async def test_the_memory_backend_seals_through_the_codec_it_is_given() -> None:
    async with Runpoint(AGENTS, database="memory:", keyring=keyring()) as rp:
        run_id = await a_run(rp)
        assert (await rp.get_run(run_id)).messages[0].content == SECRETS[0]
        storage = rp.storage
        assert isinstance(storage, MemoryStorage)
        stored = storage._messages[run_id][0].data
        assert SECRETS[0].encode() not in stored
        assert key_id_of(stored) is not None  # under a team key
