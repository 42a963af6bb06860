"""Per-team keys and crypto-shredding: each team's documents are sealed under its own key,
wrapped by the keyring; erasing a team deletes that key, so its stored rows never open
again, even with the keyring, and then removes them while the other teams serve."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import create_async_engine

from runpoint.core.errors import NotFound, Unreadable
from runpoint.core.keyring import TEAM_MAGIC, Keyring, TeamKeys, Unopened
from runpoint.core.sealing import aad
from runpoint.core.tenancy import Principal, acting_as
from runpoint.durable.retention import Sweeper
from runpoint.facade import Runpoint
from runpoint.plugins.sql import encryption
from runpoint.plugins.sql.schema import messages, sessions, team_erasures, team_keys
from runpoint.seams.host import PluginHost
from runpoint.seams.retention import Retention
from runpoint.seams.storage import Encrypted, ErasesTeams
from tests.storage.test_encryption import (
    AGENTS,
    OLD,
    SECRETS,
    a_run,
    a_schedule,
    an_approval,
    async_url,
    keyring,
    stored_bytes,
)


async def team_run(rp: Runpoint, team: str) -> str:
    with acting_as(Principal(team)):
        return await a_run(rp)


async def stored(database: str, query: Any) -> list[tuple[Any, ...]]:
    """The rows of a read made straight on the database, as a copy of it would be read."""
    engine = create_async_engine(async_url(database))
    async with engine.connect() as conn:
        rows = [tuple(row) for row in await conn.execute(query)]
    await engine.dispose()
    return rows


async def test_each_team_seals_under_its_own_key(database: str) -> None:
    async with Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as rp:
        acme, globex = await team_run(rp, "acme"), await team_run(rp, "globex")
        with acting_as(Principal("acme")):
            assert (await rp.get_run(acme)).messages[0].content == SECRETS[0]
    keys = dict(await stored(database, select(team_keys.c.team_id, team_keys.c.key_id)))
    assert set(keys) == {"acme", "globex"}
    for run_id, team in ((acme, "acme"), (globex, "globex")):
        header = bytes([TEAM_MAGIC, 16]) + keys[team].encode()
        rows = await stored(database, select(messages.c.data).where(messages.c.run_id == run_id))
        assert rows and all(bytes(data).startswith(header) for (data,) in rows)
    assert SECRETS[0].encode() not in await stored_bytes(database)


async def test_an_erased_team_never_reads_again_and_its_rows_go(database: str) -> None:
    async with Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as rp:
        acme, globex = await team_run(rp, "acme"), await team_run(rp, "globex")
        with acting_as(Principal("acme")):
            approval = await an_approval(rp)
            schedule_id = await a_schedule(rp)
            detail = await rp.get_run(acme)
            await rp.session_checkpoints.create(detail.run.session_id)
        [(key_id, wrapped)] = await stored(
            database,
            select(team_keys.c.key_id, team_keys.c.wrapped).where(team_keys.c.team_id == "acme"),
        )
        storage = rp.storage
        assert isinstance(storage, ErasesTeams)
        assert await storage.erase_team("acme")
        assert not await storage.erase_team("initech")  # nothing of it is stored

        # the rows are still there, and the key nowhere: not even the keyring opens them
        rows = await stored(
            database, select(messages.c.idx, messages.c.data).where(messages.c.run_id == acme)
        )
        assert rows
        for idx, data in rows:
            with pytest.raises(Unopened):  # the keyring alone: not the team's key
                Keyring({"k1": OLD}).open(bytes(data), aad("messages", "data", (acme, idx)))
        if database.startswith("sqlite"):  # its file and WAL hold no copy of the wrapped key
            assert bytes(wrapped) not in await stored_bytes(database)
        with acting_as(Principal("acme")), pytest.raises(Unreadable, match="was erased"):
            await rp.get_run(acme)
        with acting_as(Principal("globex")):
            assert (await rp.get_run(globex)).messages[0].content == SECRETS[0]

        # a new process too: the key is not found, and the rows are refused by name
        async with Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as other:
            with acting_as(Principal("acme")), pytest.raises(Unreadable) as refused:
                await other.get_run(acme)
            assert f"team key {key_id!r}, which was erased" in str(refused.value)

        # the retention sweep of any process removes them (a `team erase` killed midway)
        sweeper = Sweeper(rp.storage, PluginHost(), Retention())
        assert (await sweeper.sweep()).sessions == 2  # the run's, and the approval's
        with acting_as(Principal("acme")):
            with pytest.raises(NotFound):
                await rp.get_run(acme)
            with pytest.raises(NotFound):
                await rp.approvals.get(approval.id)
            with pytest.raises(NotFound):
                await rp.schedules.get(schedule_id)
            # the team goes on, under a new key
            again = await a_run(rp)
            assert (await rp.get_run(again)).messages[0].content == SECRETS[0]
        with acting_as(Principal("globex")):
            assert (await rp.get_run(globex)).messages[0].content == SECRETS[0]
    left = await stored(
        database, select(func.count()).select_from(messages).where(messages.c.run_id == acme)
    )
    assert left == [(0,)]
    teams = await stored(database, select(sessions.c.team_id).distinct())
    assert sorted(t for (t,) in teams) == ["acme", "globex"]  # acme's new session only
    assert await stored(database, select(team_erasures.c.removed)) == [(True,)]


async def test_every_process_drops_an_erased_key(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(encryption, "WATCH_SECONDS", 0.05)
    async with (
        Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as serving,
        Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as erasing,
    ):
        acme = await team_run(serving, "acme")
        with acting_as(Principal("acme")):  # opened, and kept in memory as opened
            [*_, end] = (await serving.timeline(acme))[1]
            await serving.snapshot(acme, end.message_index)
        storage = erasing.storage
        assert isinstance(storage, ErasesTeams)
        assert await storage.erase_team("acme")
        await asyncio.sleep(0.5)
        with acting_as(Principal("acme")):
            with pytest.raises(Unreadable, match="was erased"):
                await serving.get_run(acme)
            with pytest.raises(Unreadable, match="was erased"):  # not served from memory
                await serving.snapshot(acme, end.message_index)


async def test_rotation_rewraps_the_team_keys_only(database: str) -> None:
    new = Keyring({"k2": bytes(32), "k1": OLD})
    async with Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as rp:
        runs = {team: await team_run(rp, team) for team in ("acme", "globex")}
    before = await stored(database, select(messages.c.run_id, messages.c.idx, messages.c.data))
    async with Runpoint(AGENTS, database=database, keyring=new, schedule=False) as rp:
        storage = rp.storage
        assert isinstance(storage, Encrypted)
        listed = (await storage.reseal(encrypt=False, check=True, batch=10)).problems
        assert sorted(listed) == [
            "team_keys(acme).wrapped: under key 'k1'",
            "team_keys(globex).wrapped: under key 'k1'",
        ]
        done = await storage.reseal(encrypt=False, check=False, batch=10)
        assert (done.rewrapped, done.resealed, done.problems) == (2, 0, [])
    assert (
        await stored(database, select(messages.c.run_id, messages.c.idx, messages.c.data)) == before
    )
    only_new = Keyring({"k2": bytes(32)})
    async with Runpoint(AGENTS, database=database, keyring=only_new, schedule=False) as rp:
        for team, run_id in runs.items():
            with acting_as(Principal(team)):
                assert (await rp.get_run(run_id)).messages[0].content == SECRETS[0]
    async with Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as rp:
        with acting_as(Principal("acme")), pytest.raises(Unreadable, match="does not unwrap"):
            await rp.get_run(runs["acme"])


def test_a_team_key_unwraps_only_as_its_own() -> None:
    keys = TeamKeys(Keyring({"k1": OLD}))
    key_id, key = keys.new()
    wrapped = keys.wrap("acme", key_id, key)
    assert keys.unwrap("acme", key_id, wrapped) == key
    with pytest.raises(Unopened):
        keys.unwrap("globex", key_id, wrapped)  # another team's row: refused


async def test_no_text_of_an_erased_team_is_left_in_postgresql_tables(database: str) -> None:
    if database.startswith("sqlite"):
        pytest.skip("the tables' rows are what PostgreSQL serves")
    async with Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as rp:
        acme = await team_run(rp, "acme")
        assert isinstance(rp.storage, ErasesTeams)
        assert await rp.storage.erase_team("acme")
    rows = await stored(database, text("SELECT count(*) FROM team_keys WHERE team_id = 'acme'"))
    assert rows == [(0,)]
    assert acme.encode() in await stored_bytes(database)  # its rows remain until removed


async def test_a_process_reads_what_another_sealed_under_a_key_made_since(
    database: str,
) -> None:
    async with (
        Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as reader,
        Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as writer,
    ):
        # the key is made by `writer`, after `reader` opened: every read looks it up
        with acting_as(Principal("acme")):
            run_id = await a_run(writer)
            detail = await writer.get_run(run_id)
            checkpoint = await writer.session_checkpoints.create(detail.run.session_id)
            approval = await an_approval(writer)
            schedule_id = await a_schedule(writer)
            _, timeline = await reader.timeline(run_id)
            assert timeline[-1].message_preview == SECRETS[2]
            assert (await reader.get_run(run_id)).messages[0].content == SECRETS[0]
            snapshot = await reader.snapshot(run_id, 3)
            assert snapshot.detail.messages[2].content.startswith(SECRETS[1])  # type: ignore[union-attr]
            assert await reader.storage.read_events(detail.run, 0, 100)
            assert await reader.storage.tool_records(
                run_id, [c.id for c in detail.messages[1].tool_calls or []]
            )
            assert await reader.storage.session_capture(checkpoint.checkpoint_id) is not None
            assert (await reader.approvals.get(approval.id)).calls[0].tool_args == {
                "topic": SECRETS[3]
            }
            assert (await reader.schedules.get(schedule_id)).message == SECRETS[4]
