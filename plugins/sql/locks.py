"""What every writer of a session's runs does first: take the session's row."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.errors import Conflict, Locked
from runpoint.core.types import RunStatus
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.schema import runs, sessions

IN_FLIGHT = (RunStatus.PENDING.value, RunStatus.RUNNING.value)


async def lock_session(
    db: Database, conn: AsyncConnection, session_id: str, *, refuse_locked: bool = False
) -> bool:
    """Serialise the writers of a session's runs until commit, so runs commit in the order
    of their `seq`. False if there is no such session; with `refuse_locked`, Locked if it
    is locked."""
    query = select(sessions.c.locked).where(sessions.c.session_id == session_id)
    found = (await conn.execute(db.locking(query))).first()
    if found is not None and found.locked is not None and refuse_locked:
        raise Locked.session(found.locked)
    return found is not None


async def refuse_in_flight(conn: AsyncConnection, session_id: str) -> None:
    """Conflict if a run of the session is PENDING or RUNNING."""
    busy = await conn.scalar(
        select(runs.c.run_id)
        .where(runs.c.session_id == session_id, runs.c.status.in_(IN_FLIGHT))
        .limit(1)
    )
    if busy is not None:
        raise Conflict(
            f"run {busy} of session {session_id} is in flight; wait for it to finish, or cancel it"
        )
