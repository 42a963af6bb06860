"""A long run's settled rows are packed a window at a time (plugins/sql/packs.py): what is
read back is what was written, sealed or not (its events too, whose checkpoints and tool
results the packs hold), a trim takes checkpoints out of packs, `db encrypt` seals packs,
and a pack altered or moved is refused like any row."""

from __future__ import annotations

import errno
import logging
import os
from typing import Any

import msgspec
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from runpoint.core.errors import Unreadable
from runpoint.core.keyring import Keyring
from runpoint.core.types import RunStatus, Segment, ToolCall
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel, call_id, turns_since_user
from runpoint.plugins.sql import packing
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.packs import WINDOW
from runpoint.seams.agent import Agent
from runpoint.seams.model import ModelRequest, ModelResponse
from runpoint.seams.retention import Retention
from runpoint.seams.storage import Encrypted
from tests.long_runs import AGENT, SAID, TURNS, a_long_run, look, packed
from tests.storage.test_encryption import async_url, holds, stored_bytes, swap
from tests.storage.test_lean_events import Handed

pytestmark = pytest.mark.usefixtures("database")


@pytest.mark.parametrize("sealed", [False, True], ids=["clear", "sealed"])
async def test_a_long_run_reads_back_as_written_from_its_packs(database: str, sealed: bool) -> None:
    if database == "memory:":
        pytest.skip("the SQL storage's layout")
    storage = Handed(database)
    keyring = Keyring({"k": os.urandom(32)}) if sealed else None
    async with Runpoint([AGENT], storage=storage, keyring=keyring) as rp:
        run = await a_long_run(rp)
        rows = await packed(database, "messages", run.run_id)
        count = run.message_count  # a pack a window, the last one's too: the run ended
        assert rows == [(lo, min(WINDOW, count - lo)) for lo in range(0, count, WINDOW)]
        assert any(n > 1 for _, n in await packed(database, "checkpoints", run.run_id))
        whole = (await rp.get_run(run.run_id)).messages
        events = await storage.read_events(run, 0, 10_000)
        timeline = (await rp.timeline(run.run_id))[1]
    # a new process, nothing kept opened: each read opens the packs
    storage = Handed(database)
    async with Runpoint([AGENT], storage=storage, keyring=keyring) as rp:
        assert (await rp.get_run(run.run_id)).messages == whole
        got = await storage.read_events(run, 0, 10_000)
        assert [msgspec.json.encode(e) for e in got] == [msgspec.json.encode(e) for e in events]
        assert (await rp.timeline(run.run_id))[1] == timeline
        assert len(timeline) == TURNS + 1, "a checkpoint a tool batch, and the end"
        for at in (33, 34, 63, 64, 65):  # within and at the edges of packs
            snapshot = await rp.snapshot(run.run_id, at)
            assert snapshot.detail.messages == whole[: snapshot.message_index]
            assert snapshot.message_index in (at, at - 1)
            assert snapshot.checkpoint == max(
                (c for c in timeline if c.message_index <= snapshot.message_index),
                key=lambda c: c.message_index,
            )
        for after in (0, 31, 47, 90):  # a follower's pages
            page = await storage.read_events(run, after, 5)
            assert [e.seq for e in page] == [e.seq for e in events[after : after + 5]]
            assert page == events[after : after + 5]
    if sealed:
        assert not holds(await stored_bytes(database), SAID)


async def test_a_trim_takes_checkpoints_out_of_packs_and_their_events_keep_them(
    database: str,
) -> None:
    if database == "memory:":
        pytest.skip("the SQL storage's layout")
    storage = Handed(database)
    async with Runpoint([AGENT], storage=storage, retention=Retention(checkpoints=2)) as rp:
        run = await a_long_run(rp)
        before = await storage.read_events(run, 0, 10_000)
        removed = await rp.sweeper.sweep_all()
        assert removed.checkpoints == TURNS + 1 - 2
        listed = (await rp.timeline(run.run_id))[1]
        assert [c.message_index for c in listed] == [run.message_count - 1, run.message_count]
        assert await storage.read_events(run, 0, 10_000) == before
        assert (await rp.get_run(run.run_id)).run.message_count == run.message_count


async def test_db_encrypt_seals_packs(database: str) -> None:
    if database == "memory:":
        pytest.skip("the SQL storage's layout")
    async with Runpoint([AGENT], database=database) as rp:
        run = await a_long_run(rp)
        whole = (await rp.get_run(run.run_id)).messages
    keyring = Keyring({"k": os.urandom(32)})
    async with Runpoint([AGENT], database=database, keyring=keyring) as rp:
        storage = rp.storage
        assert isinstance(storage, Encrypted)
        done = await storage.reseal(encrypt=True, check=False, batch=7)
        assert done.problems == [] and done.resealed > 0
        assert (await storage.reseal(encrypt=False, check=True, batch=7)).problems == []
    async with Runpoint([AGENT], database=database, keyring=keyring) as rp:
        assert (await rp.get_run(run.run_id)).messages == whole


async def test_a_pack_altered_or_moved_is_refused_and_the_others_serve(database: str) -> None:
    if database == "memory:":
        pytest.skip("the SQL storage's layout")
    keyring = Keyring({"k": os.urandom(32)})
    async with Runpoint([AGENT], database=database, keyring=keyring) as rp:
        first, second, third = [await a_long_run(rp, f"go {i}") for i in range(3)]
    where = f"run_id = :k AND idx = {WINDOW}"
    await swap(database, "messages", "data", where, first.run_id, second.run_id)
    engine = create_async_engine(async_url(database))
    async with engine.begin() as conn:  # a pack's count altered
        await conn.execute(
            text("UPDATE checkpoints SET n = n - 1 WHERE run_id = :r AND n > 1"),
            {"r": third.run_id},
        )
    await engine.dispose()
    async with Runpoint([AGENT], database=database, keyring=keyring) as rp:
        swapped = rf"messages\({first.run_id}, {WINDOW}\).data cannot be read: failed auth"
        with pytest.raises(Unreadable, match=swapped):
            await rp.get_run(first.run_id)
        # the packs not swapped still serve
        assert len(await rp.storage.read_messages([Segment(first.run_id, 0)], WINDOW)) == WINDOW
        altered = rf"checkpoints\({third.run_id}, \d+\).data cannot be read: not a pack of"
        with pytest.raises(Unreadable, match=altered):
            await rp.queries.timeline(third.run_id)
        assert (await rp.get_run(third.run_id)).messages[-1].content == "done"


async def test_a_sealed_source_removed_under_its_fork_keeps_what_the_fork_reads(
    database: str,
) -> None:
    if database == "memory:":
        pytest.skip("the SQL storage's layout")
    keyring = Keyring({"k": os.urandom(32)})
    async with Runpoint([AGENT], database=database, keyring=keyring) as rp:
        source = await a_long_run(rp)
        go_on = ContinueRun(run_id=source.run_id, continue_from=45, input="again", fork=True)
        fork = await (await rp.continue_run(go_on)).result()
        assert fork.run_id != source.run_id and fork.status is RunStatus.COMPLETED
        before = (await rp.get_run(fork.run_id)).messages
        removed = await rp.storage.remove_runs([source.run_id])
        assert removed.run_ids == [source.run_id] and removed.messages == 96 - 45
        assert (await rp.get_run(fork.run_id)).messages == before
        rows = await packed(database, "messages", source.run_id)
        assert rows == [(0, 45)], "the first window's pack written again with what is read"
    async with Runpoint([AGENT], database=database, keyring=keyring) as rp:  # nothing kept
        assert (await rp.get_run(fork.run_id)).messages == before


@pytest.mark.parametrize(
    "failure", [OSError(errno.ENOSPC, "No space left on device"), ValueError("a bug")]
)
async def test_a_packing_that_fails_leaves_the_rows_and_the_run_goes_on(
    database: str,
    failure: Exception,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    if database == "memory:":
        pytest.skip("the SQL storage's layout")

    async def fail(*args: Any) -> None:
        raise failure

    monkeypatch.setattr(packing, "_pack", fail)
    caplog.set_level(logging.INFO, logger=packing.log.name)
    async with Runpoint([AGENT], database=database) as rp:
        run = await a_long_run(rp)
        assert all(n == 1 for _, n in await packed(database, "messages", run.run_id))
        assert len((await rp.get_run(run.run_id)).messages) == run.message_count
    told = [r for r in caplog.records if "left unpacked" in r.getMessage()]
    assert told and told[0].levelname == ("INFO" if isinstance(failure, OSError) else "ERROR")


@pytest.mark.parametrize(
    "failure", [OSError(errno.ENOSPC, "No space left on device"), ValueError("a bug")]
)
async def test_a_run_whose_end_cannot_look_for_windows_left_as_rows_ends_all_the_same(
    database: str,
    failure: Exception,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """At its end a run reads which of its windows are still rows (`packing._first_left`):
    a read that fails there, after the run's last save, is the packing's to give up, not
    the save's."""
    if database == "memory:":
        pytest.skip("the SQL storage's layout")
    read = Database.read

    async def failing(db: Database, statement: Any, *params: Any) -> Any:
        if statement is packing._ROWS:
            raise failure
        return await read(db, statement, *params)

    monkeypatch.setattr(Database, "read", failing)
    caplog.set_level(logging.INFO, logger=packing.log.name)
    async with Runpoint([AGENT], database=database) as rp:
        run = await a_long_run(rp)
        assert len((await rp.get_run(run.run_id)).messages) == run.message_count
    told = [r for r in caplog.records if "left unpacked" in r.getMessage()]
    assert told and told[0].levelname == ("INFO" if isinstance(failure, OSError) else "ERROR")


WIDE = 150  # tool calls in one batch


def all_at_once(request: ModelRequest) -> ModelResponse:
    if turns_since_user(request.messages):
        return ModelResponse(content="done")
    calls = [ToolCall(call_id(request, i), "look", {"topic": f"t{i}"}) for i in range(WIDE)]
    return ModelResponse(content="all at once", tool_calls=calls)


async def test_a_wide_batch_writes_the_windows_it_fills_packed(database: str) -> None:
    if database == "memory:":
        pytest.skip("the SQL storage's layout")
    storage = Handed(database)
    wide = Agent(id="wide", model=ScriptedModel(all_at_once), tools=[look])
    async with Runpoint([wide], storage=storage) as rp:
        run = await (await rp.create_run(CreateRun(agent_id="wide", message="go"))).result()
        count = run.message_count
        assert run.status is RunStatus.COMPLETED and count == WIDE + 3
        # [0, 64) begun by the run's birth, packed after the batch's save; [64, 128) written
        # packed by it; the rest, under half a window, a row each
        tail = [(i, 1) for i in range(2 * WINDOW, count)]
        assert await packed(database, "messages", run.run_id) == [
            (0, WINDOW),
            (WINDOW, WINDOW),
            *tail,
        ]
        whole = (await rp.get_run(run.run_id)).messages
        assert [m.role for m in whole] == ["user", "assistant", *["tool"] * WIDE, "assistant"]
        assert [m.content for m in whole[2:-1]] == [f"{SAID}t{i}" for i in range(WIDE)]
        events = await storage.read_events(run, 0, 10_000)
        assert [msgspec.json.encode(e) for e in events] == storage.handed
        assert await rp.storage.last_index(run.segments, count, "user") == 0
