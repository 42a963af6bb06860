"""Turning encryption on, and rotating its key, online (see `runpoint.seams.storage.Encrypted`).

Whether rows in the clear may still be read is the database's to say, in its `secrets`
row `UNDER_WAY`: recorded when a keyring first opens a database that holds runs or
schedules (or when `runpoint db encrypt` starts), removed when a pass of `reseal` found
none left. A server reads it at start and, while it stands, every `WATCH_SECONDS`; as often,
it looks for teams erased by another process, and drops their keys (plugins/sql/team_keys.py).

`reseal` re-wraps the team keys under the keyring's first key (a row a team: cheap), then
seals under its team's key every document that is not (in the clear, or sealed straight
under a keyring key before team keys were), the team found from the row's session."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Table, bindparam, delete, select, tuple_, update, values
from sqlalchemy import column as sql_column
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.cancels import stop_if_cancelled, stopped
from runpoint.core.keyring import TEAM_MAGIC, TeamKeys, Unopened, key_id_of
from runpoint.core.sealing import Codec, aad
from runpoint.plugins.sql import team_keys
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.schema import metadata, runs, schedules, secrets, sessions
from runpoint.plugins.sql.schema import team_keys as team_keys_table
from runpoint.plugins.sql.sealing import SEALED, UNDER_WAY, SealedColumns
from runpoint.seams.storage import Resealed

# how soon a server sees another's `team erase` (and encryption done): a read of a small
# table, cheap enough to ask every 2 s
WATCH_SECONDS = 2.0
_UNDER_WAY = secrets.c.name == UNDER_WAY
_SEEN = "encryption-keyring-seen"  # a keyring opened this database once
# the most rows `reseal` writes in one statement on PostgreSQL (a statement takes at most
# 32,767 parameters: each row is its key's, its old and its new value)
VALUES_ROWS = 1000


class SqlEncryption:
    db: Database
    _watch: asyncio.Task[None] | None = None

    @property
    def codec(self) -> Codec:
        return self.db.codec

    def encrypt_with(self, codec: Codec) -> None:
        self.db.codec = codec

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
        self._erased = await team_keys.load_all(self.db)
        self._watch = asyncio.create_task(self._watching())

    async def stop_watching(self) -> None:
        if self._watch is not None:
            await stopped(self._watch)

    async def _watching(self) -> None:
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            try:
                if self.db.codec.clear_ok:
                    self.db.codec.clear_ok = await self._under_way()
                erased, self._erased = self._erased, await team_keys.erasures(self.db)
                team_keys.forget(
                    self.db, [t for t, at in self._erased.items() if erased.get(t) != at]
                )
            except Exception as error:  # an outage: ask again next time
                stop_if_cancelled(error)

    async def _under_way(self) -> bool:
        return bool(await self.db.read(select(secrets.c.name).where(_UNDER_WAY)))

    async def reseal(self, *, encrypt: bool, check: bool, batch: int) -> Resealed:
        keyring, teams = self.db.codec.keyring, self.db.codec.teams
        if keyring is None or teams is None:
            raise ValueError("resealing needs a keyring")
        if encrypt and not check:
            async with self.db.write() as conn:
                await conn.execute(self.db.insert_new(secrets).values(name=UNDER_WAY, value=b""))
        clear_ok = encrypt or await self._under_way()
        rewrapped, problems = await _rewrap(self.db, teams, check)
        done = 0
        for sealed in SEALED:
            async for rows in _pages(self.db, sealed, batch):
                if not check:
                    await team_keys.hold(self.db, *{row[-1] for row in rows} - {None})
                resealed, found = _resealed(teams, sealed, rows, clear_ok, check)
                problems += found
                if resealed:
                    async with self.db.write() as conn:
                        for column, rows in resealed.items():
                            done += await _reseal(conn, sealed, column, rows)
        if encrypt and not check and not problems:
            async with self.db.write() as conn:
                await conn.execute(delete(secrets).where(_UNDER_WAY))
            # what was deleted or written over while the database was in the clear (old
            # versions of rows, rows packed or removed) leaves no copy in its free pages
            await self.db.reclaim(2**31)
            await self.db.wipe()
        return Resealed(done, problems, rewrapped)


async def _rewrap(db: Database, teams: TeamKeys, check: bool) -> tuple[int, list[str]]:
    """Wrap anew under the keyring's first key every team key that is not (each row
    compare-and-set, as documents are): how many, and the keys that would not unwrap (with
    `check`: those not under it, and none rewrapped)."""
    k = team_keys_table.c
    done, problems = 0, []
    for team, key_id, wrapped in await db.read(select(k.team_id, k.key_id, k.wrapped)):
        if key_id_of(wrapped) == teams.keyring.current:
            continue
        if check:
            problems.append(f"team_keys({team}).wrapped: under key {key_id_of(wrapped)!r}")
            continue
        try:
            new = teams.wrap(team, key_id, teams.unwrap(team, key_id, wrapped))
        except Unopened as exc:
            problems.append(f"team_keys({team}).wrapped: {exc}")
            continue
        async with db.write() as conn:
            same = (k.team_id == team) & (k.wrapped == wrapped)
            done += (
                await conn.execute(update(team_keys_table).where(same).values(wrapped=new))
            ).rowcount
    return done, problems


def _team(table: Table) -> Any:
    """The team of a row of `table`: its own column, or its session's, or its run's."""
    if "team_id" in table.c:
        return table.c.team_id
    s = sessions.c
    if "session_id" in table.c:
        return select(s.team_id).where(s.session_id == table.c.session_id).scalar_subquery()
    of_run = select(s.team_id).join_from(runs, sessions, runs.c.session_id == s.session_id)
    return of_run.where(runs.c.run_id == table.c.run_id).scalar_subquery()


async def _pages(db: Database, sealed: SealedColumns, batch: int) -> Any:
    """The rows of a table (its key, its sealed columns, then its team), `batch` at a
    time, in key order: each page read apart, so writers go on between them."""
    table = metadata.tables[sealed.table]
    key = [table.c[k] for k in sealed.key]
    columns = (table.c[c] for c in sealed.columns)
    query = select(*key, *columns, _team(table)).order_by(*key).limit(batch)
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
    teams: TeamKeys,
    sealed: SealedColumns,
    rows: Sequence[Sequence[Any]],
    clear_ok: bool,
    check: bool,
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """The new values of a page's columns not under their team's key (by column, each
    with the row's key and the value it replaces), and the rows that would not open (with
    `check`: all those rows, and no new values). A row whose team is not found (a gone
    run's, kept for a fork that reads it) goes under the keyring's first key."""
    keyring = teams.keyring
    resealed: dict[str, list[dict[str, Any]]] = {}
    problems: list[str] = []
    n = len(sealed.key)
    for row in rows:
        key, team = tuple(row[:n]), row[-1]
        for column, stored in zip(sealed.columns, row[n:-1], strict=True):
            key_id = None if stored is None else key_id_of(stored)
            if stored is None or stored[0] == TEAM_MAGIC:
                continue
            if team is None and key_id == keyring.current:
                continue
            name = f"{sealed.table}({', '.join(map(str, key))}).{column}"
            if check:
                under = (
                    "in the clear" if key_id is None else f"under key {key_id!r}, not its team key"
                )
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
                values
                | {
                    "old": stored,
                    "new": keyring.seal(plain, associated)
                    if team is None
                    else teams.seal(team, plain, associated),
                }
            )
    return resealed, problems


async def _reseal(
    conn: AsyncConnection, sealed: SealedColumns, column: str, rows: list[dict[str, Any]]
) -> int:
    """Write a page's new values of one column, each only if its row still holds what was
    read (a writer may have rewritten it meanwhile: it stands): how many were written. Not
    a statement a row (a round trip each on PostgreSQL): the rows sent at once where the
    driver counts what they changed (SQLite's), else as VALUES lists of `VALUES_ROWS`."""
    table = metadata.tables[sealed.table]
    names = (*(f"k{i}" for i in range(len(sealed.key))), "old", "new")
    if conn.dialect.supports_sane_multi_rowcount:
        given: dict[str, Any] = {name: bindparam(name) for name in names}
        return int((await conn.execute(_update(table, sealed, column, given), rows)).rowcount)
    types = [*(table.c[k].type for k in sealed.key), *[table.c[column].type] * 2]
    done = 0
    for i in range(0, len(rows), VALUES_ROWS):
        listed = values(*map(sql_column, names, types), name="given").data(
            [tuple(row[n] for n in names) for row in rows[i : i + VALUES_ROWS]]
        )
        done += (await conn.execute(_update(table, sealed, column, listed.c))).rowcount
    return done


def _update(table: Table, sealed: SealedColumns, column: str, given: Any) -> Any:
    """The update of `column` to `given["new"]` where the row's key is `given`'s and it
    holds `given["old"]`."""
    where = [table.c[k] == given[f"k{i}"] for i, k in enumerate(sealed.key)]
    return (
        update(table).where(*where, table.c[column] == given["old"]).values({column: given["new"]})
    )
