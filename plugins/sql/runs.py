"""Runs: inserted once with their input, read back whole (see run_rows.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec
from sqlalchemy import bindparam, false, insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core import transcript
from runpoint.core.errors import NotFound
from runpoint.core.types import KeyAnswer, Message, Run
from runpoint.plugins.sql import packs, team_keys
from runpoint.plugins.sql.births import read_rows
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.idempotency import record_answer
from runpoint.plugins.sql.locks import lock_session, refuse_in_flight
from runpoint.plugins.sql.run_rows import COLUMNS, decode_runs, run_row
from runpoint.plugins.sql.schema import messages, run_reads, runs
from runpoint.plugins.sql.transcripts import write_save

_GET_RUN = select(*COLUMNS).where(runs.c.run_id == bindparam("id"))
# a session's live history: its runs not rolled back, but for members' (read through
# their crew run)
_LIVE = (runs.c.hidden == false(), runs.c.parent_run_id.is_(None))
_LIVE_RUNS = (
    select(*COLUMNS).where(runs.c.session_id == bindparam("id"), *_LIVE).order_by(runs.c.seq)
)
_MEMBER_RUNS = select(*COLUMNS).where(runs.c.parent_run_id == bindparam("id")).order_by(runs.c.seq)


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
    """NotFound if a new run would read rows that went since its source was read: of a
    run removed meanwhile, rows no reader left holds. The caller holds the rows of the
    sessions it reads from (its own, a session fork's source), as a removal does, so
    what is there now stays until it commits."""
    new = {r.run_id for r in new_runs}
    reads = [(r, s) for r in new_runs for s in transcript.inherited(r) if s.run_id not in new]
    if not reads:
        return
    read_ids = {s.run_id for _, s in reads}
    found = set(
        (await conn.scalars(select(runs.c.run_id).where(runs.c.run_id.in_(read_ids)))).all()
    )
    for run, segment in reads:
        if segment.run_id in found:
            continue  # a run's own rows stay while it does
        m, start, end = messages.c, segment.start, segment.end or 0
        rows = await conn.execute(
            select(m.idx, m.n).where(
                m.run_id == segment.run_id, m.idx > start - packs.WINDOW, m.idx < end
            )
        )
        held = sum(max(0, min(i + n, end) - max(i, start)) for i, n in rows)
        if segment.end is None or held != end - start:
            raise NotFound(f"run {run.forked_from_run_id or segment.run_id} not found")


async def _lock_live_session(db: Database, conn: AsyncConnection, session_id: str) -> None:
    """The session's row, held (see `lock_session`): Locked if it is locked, NotFound if
    it went (retention removed it since its runs were read)."""
    if not await lock_session(db, conn, session_id, refuse_locked=True):
        raise NotFound(f"session {session_id} not found")


class SqlRuns:
    db: Database

    async def create_runs(
        self,
        runs: Sequence[Run],
        incoming: Mapping[str, Sequence[Message]] = {},
        *,
        answering: KeyAnswer | None = None,
    ) -> None:
        await team_keys.hold(self.db, *(r.team_id for r in runs))
        async with self.db.write() as conn:
            await record_answer(conn, answering)
            for session_id in sorted({r.session_id for r in runs}):
                await _lock_live_session(self.db, conn, session_id)
            await refuse_removed_sources(conn, runs)
            await insert_runs(self.db, conn, runs, incoming)

    async def start_in_session(
        self, run: Run, incoming: Sequence[Message] = (), *, answering: KeyAnswer | None = None
    ) -> Run:
        await team_keys.hold(self.db, run.team_id)
        async with self.db.write() as conn:
            await record_answer(conn, answering)
            await _lock_live_session(self.db, conn, run.session_id)
            await refuse_in_flight(conn, run.session_id)
            await refuse_removed_sources(conn, [run])
            newest = await conn.scalar(
                select(runs.c.run_id)
                .where(runs.c.session_id == run.session_id, *_LIVE)
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

    async def member_runs(self, run_id: str) -> list[Run]:
        return decode_runs(await self.db.read(_MEMBER_RUNS, {"id": run_id}), self.db.codec)
