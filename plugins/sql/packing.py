"""Writing packs (see `packs`, what a pack is): a save that fills a window whole writes it
packed (`packed_rows`); one that completes a window earlier saves began packs it after, in
a write of its own (`pack_settled`); a removal or trim that takes some of a pack's members
writes it again with the others (`thin`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

import msgspec
from sqlalchemy import and_, bindparam, delete, func, insert, select
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.sealing import Codec
from runpoint.core.types import IN_FLIGHT, Run
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.outages import outage
from runpoint.plugins.sql.packs import (
    WINDOW,
    Found,
    Mark,
    MessageRow,
    checkpoint_pack,
    checkpoints_in,
    members,
    message_pack,
    opened,
    range_values,
    role_of,
    roles,
    table_of,
)
from runpoint.plugins.sql.schema import checkpoints, messages

log = logging.getLogger("runpoint.storage")
PACK_BYTES = 24 * 1024  # a pack's documents at most: a larger one stays a row of its own
_LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE for a NOWAIT lock refused
T = TypeVar("T")


def windows(run: Run, first: int) -> list[tuple[int, int]]:
    """The windows [lo, end) of `run`'s own messages to pack once a save wrote them from
    `first` to its message_count: those it completed, and its last if the run stopped
    and it is half full (fewer rows are not worth a write; a run continued later packs
    that window again when it completes)."""
    tail = run.segments[-1] if run.segments else None
    if tail is None or tail.run_id != run.run_id:
        return []
    count = run.message_count
    ends = [*range((first // WINDOW + 1) * WINDOW, count + 1, WINDOW)]
    if run.status not in IN_FLIGHT and count % WINDOW:
        ends.append(count)
    found = []
    for end in ends:
        lo = max((end - 1) // WINDOW * WINDOW, tail.start)
        if end - lo >= (2 if end % WINDOW == 0 else WINDOW // 2):
            found.append((lo, end))
    return found


def packed_rows(run: Run, rows: Sequence[tuple[int, str, bytes]]) -> list[MessageRow]:
    """A save's new messages (index, role, document, from `first` on, in order) as the
    rows to write: those of the windows it writes whole as packs (`windows`), the others
    a row each. So a wide batch is not written twice; the windows it completes that
    earlier saves began are packed after it (`pack_settled`)."""
    found: list[MessageRow] = []
    if not rows or rows[-1][0] - rows[0][0] + 1 != len(rows):  # an edit-fork's own rows
        return [(*row, 1) for row in rows]
    first, at = rows[0][0], 0
    for lo, end in windows(run, first):
        if lo < first:
            continue
        found += [(*row, 1) for row in rows[at : lo - first]]
        for part in _parts(rows[lo - first : end - first]):
            if len(part) == 1:
                found.append((*part[0], 1))
            else:
                document = message_pack(d for *_, d in part)
                found.append((part[0][0], roles(r for _, r, _ in part), document, len(part)))
        at = end - first
    return found + [(*row, 1) for row in rows[at:]]


async def pack_settled(db: Database, run: Run, first: int) -> None:
    """Pack the windows that `run`'s last save (its messages from `first` to its
    message_count) completed or ended and that earlier saves began (those it wrote whole
    it wrote packed). Packing changes no document: one that fails (an outage, a full
    disk, another writer's) leaves the rows as they were; a run in flight packs them at
    its next save in this process (`db.unpacked`), and a run at its end packs every
    window still left as rows (one whose packing a process that died had begun)."""
    # from where an earlier packing of the run failed, if one did: else a window it
    # left would stay rows for ever (no later save completes it again)
    since = min(first, db.unpacked.pop(run.run_id, first))
    await _packed(db, run, [(lo, end) for lo, end in windows(run, since) if lo < first], since)
    if run.status not in IN_FLIGHT and (left := await _first_left(db, run, since)) < since:
        # apart: a window another writer holds (a stalled process's packing) gives up
        # these alone
        await _packed(db, run, [(lo, end) for lo, end in windows(run, left) if lo < since], left)


async def _packed(db: Database, run: Run, windows_: list[tuple[int, int]], since: int) -> None:
    """Pack `windows_` of `run` in one write (see `pack_settled`)."""
    if not windows_:
        return
    try:
        async with db.write() as conn:
            for lo, end in windows_:
                await _pack(conn, db.codec, run, messages.name, lo, end)
                await _pack(conn, db.codec, run, checkpoints.name, lo, end)
    except Exception as exc:
        if _given_up(run, windows_, exc) and run.status in IN_FLIGHT:  # a bug would fail again
            db.unpacked[run.run_id] = since


def _given_up(run: Run, windows_: list[tuple[int, int]], exc: Exception) -> bool:
    """Tell of a packing given up after a save, which stands whatever happens here:
    whether it was expected (an outage, another writer's packing: the rows stay as they
    were). Anything else is a bug, told with its traceback, that must not fail the run."""
    expected = outage(exc) is not None or isinstance(exc, (IntegrityError, _Moved))
    level = logging.INFO if expected else logging.ERROR
    log.log(
        level,
        "run %s: windows %s left unpacked: %s",
        run.run_id,
        windows_,
        exc,
        exc_info=not expected,
    )
    return expected


_ROWS = (
    select(messages.c.idx, messages.c.n)
    .where(
        messages.c.run_id == bindparam("run"),
        messages.c.idx >= bindparam("lo"),
        messages.c.idx < bindparam("hi"),
    )
    .order_by(messages.c.idx)
)


async def _first_left(db: Database, run: Run, before: int) -> int:
    """The first of `run`'s windows before `before` whose messages are still a row each
    (two consecutive rows of one: rows a packing would have joined), else `before`: one
    read of the rows' keys, at a run's end."""
    earlier = [(lo, end) for lo, end in windows(run, 0) if lo < before]
    if not earlier:
        return before
    try:
        rows = await db.read(_ROWS, {"run": run.run_id, "lo": earlier[0][0], "hi": before})
    except Exception as exc:  # after the run's last save: the packing's to give up
        _given_up(run, earlier, exc)
        return before
    alone = {idx for idx, n in rows if n == 1}
    for lo, end in earlier:
        if any(i in alone and i + 1 in alone for i in range(lo, end - 1)):
            return lo
    return before


async def _pack(
    conn: AsyncConnection, codec: Codec, run: Run, table: str, lo: int, hi: int
) -> None:
    """The window's rows (messages [lo, hi), checkpoints (lo, hi]) packed: consecutive
    rows, each under PACK_BYTES, in packs up to it."""
    t, key = table_of(table)
    inside = and_(key >= lo, key < hi) if t is messages else and_(key > lo, key <= hi)
    # The rows are taken at once or not at all (PostgreSQL; SQLite has one writer): those
    # another transaction holds (a stale process's packing of this window, stalled by
    # SIGSTOP or a lost network) would hold this run up until the statement timeout.
    read = select(t.c.run_id, key, t.c.data, t.c.n, t.c.event_seq)
    try:
        rows = (
            await conn.execute(
                read.where(t.c.run_id == run.run_id, inside)
                .order_by(key)
                .with_for_update(nowait=True)
            )
        ).all()
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) != _LOCK_NOT_AVAILABLE:
            raise
        raise _Moved(f"{table} of run {run.run_id} from {lo}: another writer holds them") from exc
    for group in (part for part in _parts(rows) if len(part) > 1):
        documents = codec.open_rows(table, "data", group, 2)
        found = [
            member
            for row, document in zip(group, documents, strict=True)
            for member in (
                members(codec, table, row, document)
                if row[3] > 1
                else [Found(row[0], row[1], document, row[4])]
            )
        ]
        gone = await conn.execute(
            delete(t).where(t.c.run_id == run.run_id, key.in_([r[1] for r in group]))
        )
        if gone.rowcount != len(group):  # another writer packed them meanwhile
            raise _Moved(f"{table} of run {run.run_id} at {found[0].index}")
        await _insert(conn, table, found, functools.partial(codec.seal, team=run.team_id))


async def _insert(
    conn: AsyncConnection,
    table: str,
    found: Sequence[Found],
    seal: Callable[..., bytes],  # (document, kind, field, *key) -> what to store
) -> None:
    """One row holding `found`, a run's consecutive messages or checkpoints: a pack, or
    a row of one's own."""
    run_id, first = found[0].run_id, found[0].index
    t, key = table_of(table)
    values: dict[str, Any] = {key.name: first}
    if len(found) == 1:
        document = found[0].document
        if t is messages:
            values["role"] = role_of(document)
        else:
            values["event_seq"] = found[0].seq
    elif t is messages:
        document = message_pack(f.document for f in found)
        values["role"] = roles(role_of(f.document) for f in found)
    else:
        document = checkpoint_pack(Mark(f.index, f.seq, msgspec.Raw(f.document)) for f in found)
    stored = seal(document, table, "data", run_id, first)
    await conn.execute(insert(t).values(run_id=run_id, data=stored, n=len(found), **values))


async def run_checkpoints(conn: AsyncConnection, codec: Codec, run_id: str) -> list[Found]:
    """All of a run's own checkpoints, in `conn`'s transaction."""
    ranges = [(run_id, -1, 2**31 - 1)]
    rows = await conn.execute(checkpoints_in(1), range_values(ranges))
    return opened(codec, checkpoints.name, rows.all(), ranges)


async def delete_checkpoints(
    conn: AsyncConnection, codec: Codec, run_id: str, doomed: Collection[int]
) -> tuple[int, int]:
    """Delete a run's checkpoints at `doomed`, in `conn`'s transaction: how many, and
    their documents' bytes."""
    count, size = await thin(conn, codec, checkpoints.name, run_id, lambda i: i not in doomed)
    c = checkpoints.c
    sizes = (
        await conn.scalars(
            delete(checkpoints)
            .where(c.run_id == run_id, c.n == 1, c.message_index.in_(doomed))
            .returning(func.length(c.data))
        )
    ).all()
    return count + len(sizes), size + sum(sizes)


async def thin(
    conn: AsyncConnection, codec: Codec, table: str, run_id: str, keep: Callable[[int], bool]
) -> tuple[int, int]:
    """Write each pack of a run's messages or checkpoints that holds members `keep`
    refuses again without them (sealed under its key), in `conn`'s transaction: how many
    members went, and their documents' bytes. Its rows of their own are the caller's."""
    t, key = table_of(table)
    packs = (
        await conn.execute(
            select(t.c.run_id, key, t.c.data, t.c.n).where(t.c.run_id == run_id, t.c.n > 1)
        )
    ).all()
    count = size = 0
    for row, document in zip(packs, codec.open_rows(table, "data", packs, 2), strict=True):
        found = members(codec, table, row, document)
        kept = [f for f in found if keep(f.index)]
        if len(kept) == len(found):
            continue
        await conn.execute(delete(t).where(t.c.run_id == run_id, key == row[1]))
        seal = functools.partial(codec.seal_like, row[2])
        for part in _consecutive(kept) if t is messages else [kept] if kept else []:
            await _insert(conn, table, part, seal)
        count += len(found) - len(kept)
        size += sum(len(f.document) for f in found if not keep(f.index))
    return count, size


class _Moved(Exception):
    """Rows being packed went meanwhile, or another writer holds them: the packing is
    given up."""


def _parts(rows: Sequence[T]) -> list[list[T]]:
    """Consecutive rows in parts whose documents (each row's third value) fit PACK_BYTES
    together; a larger one is a part alone."""
    parts: list[list[T]] = []
    size = PACK_BYTES  # the last part's: none yet
    for row in rows:
        length = len(row[2])  # type: ignore[index]
        if size + length > PACK_BYTES:
            parts.append([])
            size = 0
        parts[-1].append(row)
        size += length
    return parts


def _consecutive(found: Sequence[Found]) -> list[list[Found]]:
    """`found` (messages, by index) in runs of consecutive indexes."""
    parts: list[list[Found]] = []
    for f in found:
        if parts and parts[-1][-1].index + 1 == f.index:
            parts[-1].append(f)
        else:
            parts.append([f])
    return parts
