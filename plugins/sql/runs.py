"""Runs: inserted once with their input, read back whole (see run_rows.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from sqlalchemy import bindparam, false, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.errors import NotFound
from runpoint.core.types import KeyAnswer, Message, Run
from runpoint.plugins.sql.births import read_rows
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.idempotency import record_answer
from runpoint.plugins.sql.locks import lock_session, refuse_in_flight
from runpoint.plugins.sql.run_rows import COLUMNS, decode_runs, run_row
from runpoint.plugins.sql.schema import run_reads, runs
from runpoint.plugins.sql.transcripts import write_save

_GET_RUN = select(*COLUMNS).where(runs.c.run_id == bindparam("id"))
_LIVE_RUNS = (
    select(*COLUMNS)
    .where(runs.c.session_id == bindparam("id"), runs.c.hidden == false())
    .order_by(runs.c.seq)
)


async def insert_runs(
    db: Database,
    conn: AsyncConnection,
    new_runs: Sequence[Run],
    incoming: Mapping[str, Sequence[Message]],
) -> None:
    """Insert runs with their lineage; a run's incoming messages are then saved in the
    same transaction, exactly as `save` writes a boundary."""
    await conn.execute(insert(runs), [run_row(r, db.codec) for r in new_runs])
    if reads := read_rows(new_runs):
        await conn.execute(insert(run_reads), reads)
    for run in new_runs:
        if messages := incoming.get(run.run_id):
            await write_save(db, conn, run, messages, None)


async def refuse_removed_sources(conn: AsyncConnection, new_runs: Sequence[Run]) -> None:
    """NotFound if a fork's source, in its session (whose row the caller holds, as a
    removal does), was removed since it was read: the fork would read rows that went."""
    sources = {r.forked_from_run_id for r in new_runs if r.forked_from_session_id is None}
    sources -= {None, *(r.run_id for r in new_runs)}
    if sources:
        found = await conn.scalars(select(runs.c.run_id).where(runs.c.run_id.in_(sources)))
        if gone := sources - set(found.all()):
            raise NotFound(f"run {', '.join(sorted(map(str, gone)))} not found")


class SqlRuns:
    db: Database

    async def create_runs(
        self,
        runs: Sequence[Run],
        incoming: Mapping[str, Sequence[Message]] = {},
        *,
        answering: KeyAnswer | None = None,
    ) -> None:
        async with self.db.write() as conn:
            await record_answer(conn, answering)
            for session_id in {r.session_id for r in runs}:
                await lock_session(self.db, conn, session_id, refuse_locked=True)
            await refuse_removed_sources(conn, runs)
            await insert_runs(self.db, conn, runs, incoming)

    async def start_in_session(
        self, run: Run, incoming: Sequence[Message] = (), *, answering: KeyAnswer | None = None
    ) -> Run:
        async with self.db.write() as conn:
            await record_answer(conn, answering)
            await lock_session(self.db, conn, run.session_id, refuse_locked=True)
            await refuse_in_flight(conn, run.session_id)
            await refuse_removed_sources(conn, [run])
            newest = await conn.scalar(
                select(runs.c.run_id)
                .where(runs.c.session_id == run.session_id, runs.c.hidden == false())
                .order_by(runs.c.seq.desc())
                .limit(1)
            )
            run = msgspec.structs.replace(run, previous_run_id=newest)
            await insert_runs(self.db, conn, [run], {run.run_id: incoming})
        return run

    async def get_run(self, run_id: str) -> Run | None:
        found = decode_runs(await self.db.read(_GET_RUN, {"id": run_id}), self.db.codec)
        return found[0] if found else None

    async def list_runs(self, session_id: str) -> list[Run]:
        return decode_runs(await self.db.read(_LIVE_RUNS, {"id": session_id}), self.db.codec)
