"""Each team's data key, kept wrapped by the keyring in `team_keys` (one row a team): a
process holds the keys of the teams it writes for (`hold`) and of those whose documents
it reads (`Database.read` asks `load` for the keys its rows name). Erasing a team
(`runpoint team erase`) deletes its row: what was sealed under it never opens again, and
its rows are then deleted in batches (plugins/sql/team_erasure.py)."""

from __future__ import annotations

import functools
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import Column, Select, bindparam, select

from runpoint.core.errors import Unreadable
from runpoint.plugins.sql.schema import runs, sessions, team_erasures, team_keys
from runpoint.plugins.sql.sealing import SEALED

if TYPE_CHECKING:
    from runpoint.plugins.sql.database import Database

_SEALED = {(s.table, column) for s in SEALED for column in s.columns}
_c = team_keys.c
_ROWS = select(_c.team_id, _c.key_id, _c.wrapped)
_BY_ID = _ROWS.where(_c.key_id == bindparam("id"))
_OF_TEAM = _ROWS.where(_c.team_id == bindparam("team"))
_ERASURES = select(team_erasures.c.team_id, team_erasures.c.erased_at)
OF_SESSION = select(sessions.c.team_id).where(sessions.c.session_id == bindparam("id"))
OF_RUN = (
    select(sessions.c.team_id)
    .join_from(runs, sessions, runs.c.session_id == sessions.c.session_id)
    .where(runs.c.run_id == bindparam("id"))
)


async def hold(db: Database, *teams: str) -> None:
    """Hold these teams' keys before sealing their documents: each team's stored key, or
    a new one (the first stored for a team, by any process, is every process's)."""
    keys = db.codec.teams
    if keys is None:
        return
    for team in {t for t in teams if not keys.held(t)}:
        found = await db.read(_OF_TEAM, {"team": team})
        if not found:
            key_id, key = keys.new()
            row = {"team_id": team, "key_id": key_id, "wrapped": keys.wrap(team, key_id, key)}
            async with db.write() as conn:
                await conn.execute(db.insert_new(team_keys).values(row))
                found = (await conn.execute(_OF_TEAM, {"team": team})).all()
        keys.hold(*found[0])
        if not keys.held(team):  # its key does not unwrap: nothing is sealed under it
            raise Unreadable(f"team_keys({team}).wrapped", keys.refused(found[0][1]))


async def load(db: Database, key_ids: Collection[str]) -> None:
    """Hold the keys of these ids; those not stored are known erased."""
    keys = db.codec.teams
    if keys is None:
        return
    found = [row for k in key_ids for row in await db.read(_BY_ID, {"id": k})]
    for team, key_id, wrapped in found:
        keys.hold(team, key_id, wrapped)
    if gone := set(key_ids) - {key_id for _, key_id, _ in found}:
        keys.erased(gone)
        db.codec.forget_opened()  # what those keys opened must not be served from memory


async def load_all(db: Database) -> dict[str, float]:
    """Hold every team's key (at start): the teams erased, and when."""
    keys = db.codec.teams
    if keys is not None:
        for row in await db.read(_ROWS):
            keys.hold(*row)
    return await erasures(db)


async def erasures(db: Database) -> dict[str, float]:
    return {team: at for team, at in await db.read(_ERASURES)}


def forget(db: Database, erased: Collection[str]) -> None:
    """Drop the keys of teams erased by another process (they are looked up again: a
    team erased gets a new key for what it writes next)."""
    if (keys := db.codec.teams) is not None and erased:
        for team in erased:
            keys.drop(team)
        db.codec.forget_opened()  # what their keys opened must not be served from memory


async def load_of(db: Database, rows: Sequence[Sequence[Any]], read: Select[Any]) -> None:
    """Hold the keys that the documents among `rows` (of `read`) name, if this process
    lacks any."""
    if db.codec.teams is None or not (positions := sealed_positions(read)):
        return
    if unknown := db.codec.teams.missing(rows, positions):
        await load(db, unknown)


@functools.lru_cache(maxsize=512)
def sealed_positions(read: Select[Any]) -> tuple[int, ...]:
    """Where a read's rows have sealed documents (the role modules keep one statement
    object per shape: see compiled.py)."""
    return tuple(
        i
        for i, column in enumerate(read.selected_columns)
        if isinstance(column, Column) and (column.table.name, column.name) in _SEALED
    )


async def hold_for(db: Database, team_of: Select[Any], id_: str) -> str | None:
    """The team of a session (`OF_SESSION`) or run (`OF_RUN`), its key held (None: no
    such session or run); without a keyring, no team is needed: ""."""
    if db.codec.teams is None:
        return ""
    found = await db.read(team_of, {"id": id_})
    if not found:
        return None
    await hold(db, found[0][0])
    return str(found[0][0])
