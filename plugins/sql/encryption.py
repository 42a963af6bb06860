"""Turning encryption on, and rotating its key, online (see `runpoint.seams.storage.Encrypted`).

Whether rows in the clear may still be read is the database's to say, in its `secrets`
row `UNDER_WAY`: recorded when a keyring first opens a database that holds runs or
schedules (or when `runpoint db encrypt` starts), removed when a pass of `reseal` found
none left. A server reads it at start and, while it stands, every `WATCH_SECONDS`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, and_, bindparam, delete, select, tuple_, update

from runpoint.core.keyring import Keyring, Unopened, key_id_of
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.schema import metadata, runs, schedules, secrets
from runpoint.plugins.sql.sealing import SEALED, UNDER_WAY, Codec, SealedColumns, aad
from runpoint.seams.storage import Resealed

WATCH_SECONDS = 10.0
_UNDER_WAY = secrets.c.name == UNDER_WAY
_SEEN = "encryption-keyring-seen"  # a keyring opened this database once


class SqlEncryption:
    db: Database
    _watch: asyncio.Task[None] | None = None

    def encrypt_with(self, keyring: Keyring) -> None:
        self.db.codec = Codec(keyring)

    @property
    def refused(self) -> int:
        return self.db.codec.failures

    async def watch_encryption(self) -> None:
        """With a keyring: whether rows in the clear serve, now and while that stands."""
        if self.db.codec.keyring is None:
            return
        async with self.db.write() as conn:
            first = await conn.execute(self.db.insert_new(secrets).values(name=_SEEN, value=b""))
            # a keyring's first opening of a database with runs (or schedules, made before
            # any run): they are in the clear
            held = select(runs.c.run_id).union_all(select(schedules.c.schedule_id)).limit(1)
            if first.rowcount and await conn.scalar(held) is not None:
                await conn.execute(self.db.insert_new(secrets).values(name=UNDER_WAY, value=b""))
        self.db.codec.clear_ok = await self._under_way()
        if self.db.codec.clear_ok:
            self._watch = asyncio.create_task(self._watching())

    async def stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch

    async def _watching(self) -> None:
        while self.db.codec.clear_ok:
            await asyncio.sleep(WATCH_SECONDS)
            with contextlib.suppress(Exception):  # an outage: ask again next time
                self.db.codec.clear_ok = await self._under_way()

    async def _under_way(self) -> bool:
        return bool(await self.db.read(select(secrets.c.name).where(_UNDER_WAY)))

    async def reseal(self, *, encrypt: bool, check: bool, batch: int) -> Resealed:
        keyring = self.db.codec.keyring
        if keyring is None:
            raise ValueError("resealing needs a keyring")
        if encrypt and not check:
            async with self.db.write() as conn:
                await conn.execute(self.db.insert_new(secrets).values(name=UNDER_WAY, value=b""))
        clear_ok = encrypt or await self._under_way()
        done, problems = 0, []
        for sealed in SEALED:
            async for rows in _pages(self.db, sealed, batch):
                resealed, found = _resealed(keyring, sealed, rows, clear_ok, check)
                problems += found
                if resealed:
                    async with self.db.write() as conn:
                        for column, values in resealed.items():
                            statement = _reseal(sealed, column)
                            for row in values:  # one by one: each tells whether it took
                                done += (await conn.execute(statement, row)).rowcount
        if encrypt and not check and not problems:
            async with self.db.write() as conn:
                await conn.execute(delete(secrets).where(_UNDER_WAY))
        return Resealed(done, problems)


async def _pages(db: Database, sealed: SealedColumns, batch: int) -> Any:
    """The rows of a table (its key, then its sealed columns), `batch` at a time, in key
    order: each page read apart, so writers go on between them."""
    table = metadata.tables[sealed.table]
    key = [table.c[k] for k in sealed.key]
    query = select(*key, *(table.c[c] for c in sealed.columns)).order_by(*key).limit(batch)
    after: Sequence[Any] | None = None
    while True:
        page = query if after is None else query.where(_past(key, after))
        rows = await db.read(page)
        if not rows:
            return
        yield rows
        after = rows[-1][: len(key)]


def _past(key: list[Any], after: Sequence[Any]) -> ColumnElement[bool]:
    if len(key) == 1:
        return key[0] > after[0]  # type: ignore[no-any-return]
    return tuple_(*key) > tuple_(*after)


def _resealed(
    keyring: Keyring,
    sealed: SealedColumns,
    rows: Sequence[Sequence[Any]],
    clear_ok: bool,
    check: bool,
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The new values of a page's columns not under the keyring's first key (by column,
    each with the row's key and the value it replaces), and the rows that would not open
    (with `check`: all those rows, and no new values)."""
    resealed: dict[str, list[dict[str, Any]]] = {}
    problems: list[str] = []
    n = len(sealed.key)
    for row in rows:
        key = tuple(row[:n])
        for column, stored in zip(sealed.columns, row[n:], strict=True):
            key_id = None if stored is None else key_id_of(stored)
            if stored is None or key_id == keyring.current:
                continue
            name = f"{sealed.table}({', '.join(map(str, key))}).{column}"
            if check:
                under = "in the clear" if key_id is None else f"under key {key_id!r}"
                problems.append(f"{name}: {under}")
                continue
            associated = aad(sealed.table, column, key)
            if key_id is None and not clear_ok:
                problems.append(f"{name}: stored in the clear")
                continue
            try:
                plain = stored if key_id is None else keyring.open(stored, associated)
            except Unopened as exc:
                problems.append(f"{name}: {exc}")
                continue
            values = {f"k{i}": k for i, k in enumerate(key)}
            resealed.setdefault(column, []).append(
                values | {"old": stored, "new": keyring.seal(plain, associated)}
            )
    return resealed, problems


def _reseal(sealed: SealedColumns, column: str) -> Any:
    """The update of one column of one row, if it still holds what was read (a writer may
    have rewritten it meanwhile: it stands)."""
    table = metadata.tables[sealed.table]
    where = [table.c[k] == bindparam(f"k{i}") for i, k in enumerate(sealed.key)]
    return (
        update(table)
        .where(and_(*where, table.c[column] == bindparam("old")))
        .values({column: bindparam("new")})
    )
