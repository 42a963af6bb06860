"""With a keyring, a transcript's rows once opened are not opened again while their
ciphertext stays the same (runpoint.core.sealing, `Opened`): a row altered, swapped or put
back in the clear after a read is still refused by name, never served from memory."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from runpoint.core import sealing
from runpoint.core.errors import Unreadable
from runpoint.core.keyring import Keyring
from runpoint.core.types import Segment
from runpoint.facade import ContinueRun, Runpoint
from runpoint.plugins.sql import encryption
from runpoint.plugins.sql.store import SqlStorage
from tests.storage.test_encryption import AGENTS, SECRETS, a_run, async_url, keyring, swap


async def write(database: str, sql: str, **values: object) -> None:
    engine = create_async_engine(async_url(database))
    async with engine.begin() as conn:
        await conn.execute(text(sql), values)
    await engine.dispose()


async def test_rows_swapped_after_a_read_are_refused_by_the_same_server(database: str) -> None:
    async with Runpoint(AGENTS, database=database, keyring=keyring(), schedule=False) as rp:
        first, second = await a_run(rp), await a_run(rp)
        fork = await (await rp.continue_run(ContinueRun(run_id=first, continue_from=2))).result()
        for run_id in (first, second, fork.run_id):  # every row opened (a fork's source's too)
            assert (await rp.get_run(run_id)).messages[0].content == SECRETS[0]
            _, timeline = await rp.timeline(run_id)
            assert timeline[-1].message_preview == SECRETS[2]
        await swap(database, "messages", "data", f"run_id = '{first}' AND idx = :k", 0, 3)
        await swap(
            database, "checkpoints", "data", "run_id = :k AND message_index = 4", first, second
        )
        with pytest.raises(Unreadable, match=rf"messages\({first}, 0\).data cannot be read: fail"):
            await rp.storage.read_messages([Segment(first, 0)], 4)
        with pytest.raises(Unreadable, match=rf"messages\({first}, 0\).data"):
            await rp.get_run(fork.run_id)  # the fork reads the swapped row of its source
        with pytest.raises(Unreadable, match=rf"checkpoints\({second}, 4\).data"):
            await rp.timeline(second)
        # the rows not swapped still serve
        assert len(await rp.storage.read_messages([Segment(first, 1)], 3)) == 2
        assert (await rp.get_run(second)).messages[3].content == SECRETS[2]
        # swapped back, they serve again
        await swap(database, "messages", "data", f"run_id = '{first}' AND idx = :k", 0, 3)
        assert (await rp.get_run(first)).messages[0].content == SECRETS[0]


async def test_a_row_read_in_the_clear_is_refused_once_encryption_is_done(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(encryption, "WATCH_SECONDS", 0.01)
    async with Runpoint(AGENTS, database=database) as rp:
        clear = await a_run(rp)
    engine = create_async_engine(async_url(database))
    async with engine.connect() as conn:
        read = text("SELECT data FROM messages WHERE run_id = :r AND idx = 0")
        plain = (await conn.execute(read, {"r": clear})).scalar_one()
    await engine.dispose()
    async with Runpoint(AGENTS, database=database, keyring=keyring()) as rp:
        # while encryption is under way, its rows in the clear serve as such
        assert (await rp.get_run(clear)).messages[0].content == SECRETS[0]
        storage = rp.storage
        assert isinstance(storage, SqlStorage)
        await storage.reseal(encrypt=True, check=False, batch=10)
        for _ in range(500):  # until the server sees encryption done
            if not storage.db.codec.clear_ok:
                break
            await asyncio.sleep(0.01)
        # the document it read in the clear, put back in place of its ciphertext
        await write(
            database,
            "UPDATE messages SET data = :d WHERE run_id = :r AND idx = 0",
            d=plain,
            r=clear,
        )
        with pytest.raises(Unreadable, match=rf"messages\({clear}, 0\).data.*in the clear"):
            await rp.get_run(clear)


def test_what_is_kept_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sealing, "OPENED_BYTES", 3_000)
    codec = sealing.Codec(Keyring({"k": bytes(32)}))
    assert codec.teams is not None
    key_id, key = codec.teams.new()
    codec.teams.hold("t", key_id, codec.teams.wrap("t", key_id, key))

    def rows(size: int, count: int) -> list[tuple[str, int, bytes]]:
        document = b"x" * size
        return [
            ("r", i, codec.seal(document, "messages", "data", "r", i, team="t"))
            for i in range(count)
        ]

    written = rows(100, 3)  # what is sealed is kept as opened
    assert len(codec.opened) == 3
    codec.opened.clear()
    assert codec.open_rows("messages", "data", written, 2) == [b"x" * 100] * 3
    assert len(codec.opened) == 3
    codec.open_rows("messages", "data", rows(100, 5), 2)  # past 3,000 bytes: it starts over
    assert len(codec.opened) < 5 and codec.opened.size <= 3_000
    codec.opened.clear()
    [big] = rows(40_000, 1)  # a document and its ciphertext past OPENED_ENTRY: not kept
    assert not codec.opened
    assert codec.open_rows("messages", "data", [big], 2) == [b"x" * 40_000]
    assert not codec.opened and codec.opened.size == 0
    # nor among others opened at once (a first read): those are kept
    small = rows(100, 3)[1:]  # rows 1 and 2 (the big one is row 0)
    codec.opened.clear()
    assert codec.open_rows("messages", "data", [*small, big], 2) == [b"x" * 100] * 2 + [
        b"x" * 40_000
    ]
    assert len(codec.opened) == 2 and codec.opened.size <= 3_000


def test_a_first_read_opens_each_segment_and_names_the_row_that_fails() -> None:
    """A first read opens its rows at once (`Codec._open_fresh`); a row that does not open
    among them is still named, and the rows in the clear while encryption is under way
    still serve as such."""
    codec = sealing.Codec(Keyring({"k": bytes(32)}))
    assert codec.teams is not None
    key_id, key = codec.teams.new()
    codec.teams.hold("t", key_id, codec.teams.wrap("t", key_id, key))
    # a fork's read: its source's rows 0-1, then its own 2-3
    rows = [
        (run, i, codec.seal(b"doc %d" % i, "messages", "data", run, i, team="t"))
        for run, i in (("source", 0), ("source", 1), ("fork", 2), ("fork", 3))
    ]
    codec.forget_opened()
    assert codec.open_rows("messages", "data", rows, 2) == [b"doc 0", b"doc 1", b"doc 2", b"doc 3"]
    assert codec.opened.get(("messages", "data", "fork", 3)) == (rows[3][2], b"doc 3")
    assert len(codec.opened) == 4
    swapped = [*rows[:2], (*rows[2][:2], rows[3][2]), (*rows[3][:2], rows[2][2])]
    for cold in (True, False):  # nothing kept, and every row kept from before
        if cold:
            codec.forget_opened()
        with pytest.raises(Unreadable, match=r"messages\(fork, 2\).data cannot be read: fail"):
            codec.open_rows("messages", "data", swapped, 2)
    assert codec.failures == 2
    # while encryption is under way, a row in the clear serves as it is (and is not kept)
    codec.clear_ok = True
    codec.forget_opened()
    clear = [*rows[:3], ("fork", 3, b'{"plain": 3}')]
    assert codec.open_rows("messages", "data", clear, 2)[2:] == [b"doc 2", b'{"plain": 3}']
    assert codec.opened.get(("messages", "data", "fork", 3)) is None
    codec.clear_ok = False
    with pytest.raises(Unreadable, match=r"messages\(fork, 3\).data cannot be read: stored in"):
        codec.open_rows("messages", "data", clear, 2)
