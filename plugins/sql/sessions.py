"""Sessions: their rows with the event log's cursor, their locks and rollbacks."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
from sqlalchemy import Select, bindparam, false, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.errors import Conflict
from runpoint.core.types import KeyAnswer, Message, Rollback, Run, Session
from runpoint.plugins.sql import team_keys
from runpoint.plugins.sql.births import births
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.documents import document
from runpoint.plugins.sql.erase import captures, delete_sessions, erase
from runpoint.plugins.sql.idempotency import record_answer
from runpoint.plugins.sql.locks import lock_session, refuse_in_flight
from runpoint.plugins.sql.run_rows import COLUMNS, decode_runs
from runpoint.plugins.sql.runs import insert_runs, refuse_removed_sources

# named apart from the parameters `sessions` and `runs` of `create_sessions`
from runpoint.plugins.sql.schema import runs as runs_table
from runpoint.plugins.sql.schema import sessions as sessions_table

_decode_session = msgspec.json.Decoder(Session).decode
_COLUMNS = (
    sessions_table.c.data,
    sessions_table.c.event_seq,
    sessions_table.c.locked,
    sessions_table.c.session_name,
)
_GET_SESSION = select(*_COLUMNS).where(sessions_table.c.session_id == bindparam("id"))
_TEAM_SESSIONS = (
    select(*_COLUMNS)
    .where(sessions_table.c.team_id == bindparam("team"))
    .order_by(sessions_table.c.created_at.desc(), sessions_table.c.session_id)
    .limit(bindparam("limit"))
    .offset(bindparam("offset"))
)


@functools.lru_cache(maxsize=16)
def _first_runs(count: int) -> Select[tuple[object, ...]]:
    """The first live run of each of `count` sessions (`id0`, `id1`, ...): its lowest seq."""
    firsts = (
        select(func.min(runs_table.c.seq))
        .where(
            runs_table.c.session_id.in_([bindparam(f"id{i}") for i in range(count)]),
            runs_table.c.hidden == false(),
        )
        .group_by(runs_table.c.session_id)
    )
    return select(*COLUMNS).where(runs_table.c.seq.in_(firsts))


class SqlSessions:
    db: Database

    async def create_sessions(
        self,
        sessions: Sequence[Session],
        runs: Sequence[Run] = (),
        incoming: Mapping[str, Sequence[Message]] = {},
        *,
        answering: KeyAnswer | None = None,
    ) -> None:
        await team_keys.hold(self.db, *(r.team_id for r in runs))
        rows = births(sessions, runs, incoming, self.db.codec)
        named = [s for s in sessions if s.session_name is not None]
        # a session fork's source sessions: held, as a removal holds them, while its
        # runs are checked to read no row that went since the source was read
        born = {s.session_id for s in sessions}
        sources = sorted(
            {s for r in runs if (s := r.forked_from_session_id) is not None and s not in born}
        )
        try:
            if answering is None and not named and not sources:  # one write (database.py)
                await self.db.save_births(rows)
            else:  # a transaction: the birth and the rest
                async with self.db.write() as conn:
                    await record_answer(conn, answering)
                    for source in sources:
                        await lock_session(self.db, conn, source)
                    await refuse_removed_sources(conn, runs)
                    await self.db.insert_births(conn, rows)
                    for session in named:
                        await _rename(conn, session.session_id, session.session_name)
        except IntegrityError:
            taken = ", ".join(s.session_id for s in sessions)
            raise Conflict(f"session {taken} already exists") from None
        rows.written(runs)

    async def get_session(self, session_id: str) -> Session | None:
        found = _decode_sessions(await self.db.read(_GET_SESSION, {"id": session_id}))
        return found[0] if found else None

    async def list_sessions(self, *, team_id: str, limit: int, offset: int) -> list[Session]:
        values = {"team": team_id, "limit": limit, "offset": offset}
        return _decode_sessions(await self.db.read(_TEAM_SESSIONS, values))

    async def first_inputs(self, session_ids: Sequence[str]) -> dict[str, str | None]:
        ids = {f"id{i}": session_id for i, session_id in enumerate(session_ids)}
        rows = await self.db.read(_first_runs(len(ids)), ids) if ids else []
        found = decode_runs(rows, self.db.codec)
        return {run.session_id: run.input for run in found}

    async def rename_session(self, session_id: str, name: str | None) -> bool:
        async with self.db.write() as conn:
            return await _rename(conn, session_id, name)

    async def delete_sessions(self, session_ids: Sequence[str]) -> bool:
        doomed = sorted(set(session_ids))  # one order for every writer: no deadlock
        async with self.db.write() as conn:
            for session_id in doomed:
                if not await lock_session(self.db, conn, session_id):
                    return False
                await refuse_in_flight(conn, session_id)
            of_them = select(runs_table.c.run_id).where(runs_table.c.session_id.in_(doomed))
            run_ids = list((await conn.scalars(of_them)).all())
            # forks elsewhere keep what they read of these runs (copy-on-write)
            await erase(conn, self.db.codec, [*run_ids, *await captures(conn, doomed)], run_ids)
            await delete_sessions(conn, doomed)
            return True

    async def lock_session(
        self, session_id: str, reason: str, rollback: Rollback | None = None
    ) -> bool:
        async with self.db.write() as conn:
            if not await lock_session(self.db, conn, session_id, refuse_locked=True):
                return False
            await refuse_in_flight(conn, session_id)
            await _set_lock(conn, session_id, reason, rollback)
            return True

    async def unlock_session(self, session_id: str, rollback_owner: str | None = None) -> bool:
        async with self.db.write() as conn:
            if rollback_owner is None:
                found = await lock_session(self.db, conn, session_id)
            else:
                found = await self._rollback(conn, session_id, rollback_owner) is not None
            if found:
                await _set_lock(conn, session_id, None, None)
            return found

    async def hold_rollback(self, session_id: str, rollback: Rollback) -> bool:
        async with self.db.write() as conn:
            held = await self._rollback(conn, session_id, rollback.lease.owner)
            if held is None or held.checkpoint_id != rollback.checkpoint_id:
                return False
            await _set_lock(conn, session_id, "rollback", rollback)
            return True

    async def rollback_session(self, session_id: str, runs: Sequence[Run], owner: str) -> bool:
        await team_keys.hold(self.db, *(r.team_id for r in runs))
        async with self.db.write() as conn:
            # the session's row first, as `save`
            if await self._rollback(conn, session_id, owner) is None:
                return False
            await conn.execute(
                update(runs_table)
                .where(runs_table.c.session_id == session_id, runs_table.c.hidden == false())
                .values(hidden=True)
            )
            if runs:
                await insert_runs(self.db, conn, runs, {})
            # the rollback is an event of the session too
            next_event = sessions_table.c.event_seq + 1
            await _set_lock(conn, session_id, None, None, event_seq=next_event)
            return True

    async def _rollback(
        self, conn: AsyncConnection, session_id: str, owner: str
    ) -> Rollback | None:
        """The session's rollback under way if its lease is `owner`'s or ran out, its row
        held until commit (as `lock_session`)."""
        query = select(sessions_table.c.locked, sessions_table.c.data).where(
            sessions_table.c.session_id == session_id
        )
        found = (await conn.execute(self.db.locking(query))).first()
        if found is None or found.locked != "rollback":
            return None
        rollback = _decode_session(found.data).rollback
        return rollback if rollback is not None and rollback.lease.open_to(owner) else None


async def _set_lock(
    conn: AsyncConnection,
    session_id: str,
    locked: str | None,
    rollback: Rollback | None,
    **values: Any,
) -> None:
    """Lock the session (`locked`: why) or unlock it (None), with the rollback under way if
    that is why; the caller holds its row."""
    where = sessions_table.c.session_id == session_id
    data = (await conn.execute(select(sessions_table.c.data).where(where))).scalar_one()
    session = msgspec.structs.replace(_decode_session(data), rollback=rollback)
    await conn.execute(
        update(sessions_table).where(where).values(locked=locked, data=document(session), **values)
    )


async def _rename(conn: AsyncConnection, session_id: str, name: str | None) -> bool:
    renamed = await conn.execute(
        update(sessions_table)
        .where(sessions_table.c.session_id == session_id)
        .values(session_name=name)
    )
    return bool(renamed.rowcount)


def _decode_sessions(rows: Sequence[Sequence[Any]]) -> list[Session]:
    return [
        msgspec.structs.replace(
            _decode_session(data), event_seq=seq, locked=locked, session_name=name
        )
        for data, seq, locked, name in rows
    ]
