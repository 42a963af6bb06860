"""Removal that respects lineage (see runpoint.seams.retention), in a caller's write."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from sqlalchemy import ColumnElement, Table, and_, delete, func, not_, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.sealing import Codec
from runpoint.plugins.sql import packing
from runpoint.plugins.sql.schema import (
    approvals,
    checkpoints,
    messages,
    run_events,
    run_reads,
    runs,
    session_checkpoints,
    sessions,
    tool_calls,
)
from runpoint.seams.retention import Removed


async def erase(
    conn: AsyncConnection, codec: Codec, readers: Collection[str], run_ids: Collection[str]
) -> Removed:
    """Delete the runs `run_ids` (their rows, event logs, tool-call records and approvals)
    and the lineage of `readers` (runs and session checkpoints, these runs among them);
    then the messages and checkpoints of these runs, and of the gone runs they read, but
    for those a reader left reads."""
    sources = set(run_ids)
    if readers:
        read = select(run_reads.c.source_run_id).where(run_reads.c.reader.in_(readers))
        sources |= set((await conn.scalars(read)).all())
        await conn.execute(delete(run_reads).where(run_reads.c.reader.in_(readers)))
    removed = Removed()
    if run_ids:
        removed += await delete_events(conn, run_events.c.run_id.in_(run_ids))
        await conn.execute(delete(tool_calls).where(tool_calls.c.run_id.in_(run_ids)))
        await conn.execute(delete(approvals).where(approvals.c.run_id.in_(run_ids)))
        await conn.execute(delete(runs).where(runs.c.run_id.in_(run_ids)))
    if not sources:
        return removed
    left = select(runs.c.run_id).where(runs.c.run_id.in_(sources))
    gone = sorted(sources - set((await conn.scalars(left)).all()))
    kept = await read_ranges(conn, gone)
    unread = [s for s in gone if s not in kept]
    if unread:  # most: nothing reads them, all their rows go at once
        removed += await _delete_rows(
            conn, messages.c.run_id.in_(unread), checkpoints.c.run_id.in_(unread)
        )
    for source, ranges in kept.items():
        # what a reader reads stays: packs are written again with that alone, then the
        # rows of their own outside every range go
        def read_message(i: int, ranges: list[tuple[int, int]] = ranges) -> bool:
            return any(lo <= i < hi for lo, hi in ranges)

        def read_checkpoint(i: int, ranges: list[tuple[int, int]] = ranges) -> bool:
            return any(lo < i <= hi for lo, hi in ranges)

        count, size = await packing.thin(conn, codec, messages.name, source, read_message)
        marks, more = await packing.thin(conn, codec, checkpoints.name, source, read_checkpoint)
        removed += Removed(messages=count, checkpoints=marks, size=size + more)
        m, c = messages.c, checkpoints.c
        removed += await _delete_rows(
            conn,
            and_(
                m.run_id == source,
                m.n == 1,
                not_(or_(*(and_(m.idx >= lo, m.idx < hi) for lo, hi in ranges))),
            ),
            and_(
                c.run_id == source,
                c.n == 1,
                not_(
                    or_(*(and_(c.message_index > lo, c.message_index <= hi) for lo, hi in ranges))
                ),
            ),
        )
    return removed


async def read_ranges(
    conn: AsyncConnection, sources: Sequence[str]
) -> dict[str, list[tuple[int, int]]]:
    """The ranges [lo, hi) of these runs' rows that readers read, merged, by run."""
    if not sources:
        return {}
    r = run_reads.c
    rows = await conn.execute(
        select(r.source_run_id, r.lo, r.hi)
        .where(r.source_run_id.in_(sources))
        .order_by(r.source_run_id, r.lo)
    )
    found: dict[str, list[tuple[int, int]]] = {}
    for source, lo, hi in rows:
        ranges = found.setdefault(source, [])
        if ranges and lo <= ranges[-1][1]:
            ranges[-1] = (ranges[-1][0], max(hi, ranges[-1][1]))
        else:
            ranges.append((lo, hi))
    return found


async def _delete_rows(
    conn: AsyncConnection, message_rows: ColumnElement[bool], checkpoint_rows: ColumnElement[bool]
) -> Removed:
    count, size = await delete_rows(conn, messages, message_rows)
    marks, more = await delete_rows(conn, checkpoints, checkpoint_rows)
    return Removed(messages=count, checkpoints=marks, size=size + more)


async def delete_rows(
    conn: AsyncConnection, table: Table, where: ColumnElement[bool]
) -> tuple[int, int]:
    """Delete rows of messages or checkpoints: how many they held, and the bytes of their
    documents."""
    rows = (
        await conn.execute(
            delete(table).where(where).returning(table.c.n, func.length(table.c.data))
        )
    ).all()
    return sum(n for n, _ in rows), sum(size for _, size in rows)


async def captures(conn: AsyncConnection, session_ids: Sequence[str]) -> list[str]:
    """The ids of these sessions' session checkpoints (readers of what they captured)."""
    c = session_checkpoints.c
    found = await conn.scalars(select(c.checkpoint_id).where(c.session_id.in_(session_ids)))
    return list(found.all())


async def delete_sessions(conn: AsyncConnection, session_ids: Sequence[str]) -> int:
    """Delete sessions and their session checkpoints (their runs, and their checkpoints'
    lineage, erased already): how many sessions."""
    if not session_ids:
        return 0
    c = session_checkpoints.c
    await conn.execute(delete(session_checkpoints).where(c.session_id.in_(session_ids)))
    done = await conn.execute(delete(sessions).where(sessions.c.session_id.in_(session_ids)))
    return int(done.rowcount)


async def delete_events(conn: AsyncConnection, where: ColumnElement[bool]) -> Removed:
    """Delete rows of event logs: how many events (a row holds those written together, up
    to its `seq`: a run's last row's is its count), and their bytes."""
    e = run_events.c
    rows = (
        await conn.execute(
            delete(run_events).where(where).returning(e.run_id, e.seq, func.length(e.data))
        )
    ).all()
    last: dict[str, int] = {}
    for run_id, seq, _ in rows:
        last[run_id] = max(seq, last.get(run_id, 0))
    return Removed(events=sum(last.values()), size=sum(size for *_, size in rows))
