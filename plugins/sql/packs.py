"""A run's settled rows, packed: once a save takes a run's messages past a multiple of
WINDOW, the window's messages are kept in one row (a pack), and its checkpoints in
another; so is the last window of a run that stopped (ended or paused), if half full.
A save that fills a window whole writes it packed (`packed_rows`); one that completes a
window earlier saves began packs it after, in a write of its own (`pack_settled`).
With a keyring each row is one AES-GCM open, which costs about as much as reading a small
row in the clear: a first read of a run opens a pack a window, not a row a message and a
row a checkpoint (and SQLite hands back fewer rows, keyring or not).

A pack is keyed by its first member and holds `n` of them (a column in the clear); it
never spans a multiple of WINDOW, so the packs holding the indexes from `lo` on are among
the rows keyed after lo - WINDOW. A message pack is the JSON array of its members'
documents, indexes idx..idx+n-1 (its `role` the first letters of theirs); a checkpoint
pack the array of `[message_index, event_seq, document]`. A row a save writes into a
window packed already (a checkpoint at a run's end) stays a row of its own: a read takes
a window's packs and rows together. A pack is sealed as one document, bound to its row
like any other; one that does not hold the `n` members its row says is refused as an
altered row is. A removal or trim that takes some of a pack's members writes it again
with the others (`thin`)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, TypeVar

import msgspec
from sqlalchemy import (
    BindParameter,
    Column,
    ColumnElement,
    Select,
    Table,
    and_,
    bindparam,
    delete,
    func,
    insert,
    or_,
    select,
)
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.sealing import Codec
from runpoint.core.types import IN_FLIGHT, Run
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.outages import outage
from runpoint.plugins.sql.schema import checkpoints, messages

log = logging.getLogger("runpoint.storage")
WINDOW = 64  # message indexes: no pack spans a multiple of it
_LOCK_NOT_AVAILABLE = "55P03"  # PostgreSQL's SQLSTATE for a NOWAIT lock refused
PACK_BYTES = 24 * 1024  # a pack's documents at most: a larger one stays a row of its own

Range = tuple[str, int, int]  # run_id, lo, hi
MessageRow = tuple[int, str, bytes, int]  # index, role, document, n
T = TypeVar("T")


class Mark(msgspec.Struct, array_like=True):
    """A checkpoint in a pack."""

    index: int
    seq: int | None
    document: msgspec.Raw


_message_members = msgspec.json.Decoder(list[msgspec.Raw]).decode
_checkpoint_members = msgspec.json.Decoder(list[Mark]).decode
_encode = msgspec.json.Encoder().encode


class _Role(msgspec.Struct):
    role: str


_decode_role = msgspec.json.Decoder(_Role).decode


def role_of(document: bytes) -> str:
    """A message document's role, nothing else decoded."""
    return _decode_role(document).role


def roles(held: Iterable[str]) -> str:
    """A message pack's `role`: the first letter of each role its members have ("atu"),
    so that a search for the last message of a role skips the packs without one."""
    return "".join(sorted({role[0] for role in held}))


def range_values(ranges: Sequence[Range]) -> dict[str, object]:
    values: dict[str, object] = {}
    for i, (run_id, lo, hi) in enumerate(ranges):
        values |= {f"run{i}": run_id, f"lo{i}": lo, f"hi{i}": hi}
    return values


def _in_ranges(
    run_id: ColumnElement[str],
    within: Callable[[BindParameter[int], BindParameter[int]], ColumnElement[bool]],
    ranges: int,
) -> ColumnElement[bool]:
    """`(run_id = :run0 AND within(:lo0, :hi0)) OR ...`, one per range."""
    return or_(
        *(
            and_(run_id == bindparam(f"run{i}"), within(bindparam(f"lo{i}"), bindparam(f"hi{i}")))
            for i in range(ranges)
        )
    )


# One statement object per number of ranges, so each is compiled once (see compiled.py).
@functools.lru_cache(maxsize=64)
def messages_in(ranges: int) -> Select[tuple[str, int, bytes, int]]:
    """The rows holding the messages of runs' ranges [lo, hi), by index (see `opened`)."""
    m = messages.c
    where = _in_ranges(m.run_id, lambda lo, hi: and_(m.idx > lo - WINDOW, m.idx < hi), ranges)
    return select(m.run_id, m.idx, m.data, m.n).where(where).order_by(m.idx)


@functools.lru_cache(maxsize=64)
def checkpoints_in(ranges: int) -> Select[tuple[str, int, bytes, int, int | None]]:
    """The rows holding the checkpoints of runs' ranges (lo, hi] (a segment's: the one at
    a fork point is its source's), by message index (see `opened`)."""
    c = checkpoints.c
    where = _in_ranges(
        c.run_id,
        lambda lo, hi: and_(c.message_index > lo - WINDOW, c.message_index <= hi),
        ranges,
    )
    return (
        select(c.run_id, c.message_index, c.data, c.n, c.event_seq)
        .where(where)
        .order_by(c.message_index)
    )


class Found(msgspec.Struct, array_like=True, gc=False):
    """A message or checkpoint a read found: its run, index, document and (a checkpoint's)
    place in its session's event log."""

    run_id: str
    index: int
    document: bytes
    seq: int | None = None


def opened(
    codec: Codec, table: str, rows: Sequence[Sequence[Any]], ranges: Sequence[Range]
) -> list[Found]:
    """The members within `ranges` of rows read by `messages_in` or `checkpoints_in`
    (run_id, index, stored document, n[, event_seq]), opened, in the rows' order."""
    is_messages = table == messages.name
    within: dict[str, list[tuple[int, int]]] = {}
    for run_id, lo, hi in ranges:  # [lo, hi) for messages, (lo, hi] for checkpoints
        within.setdefault(run_id, []).append((lo, hi) if is_messages else (lo + 1, hi + 1))
    bounds = within.get
    # a row none of whose members is wanted is not opened
    rows = [
        r
        for r in rows
        if _overlaps(r[1], r[1] + (r[3] if is_messages or r[3] == 1 else WINDOW), bounds(r[0]))
    ]
    found: list[Found] = []
    ordered = True  # a source's pack read around an edit-fork's rows is not in order
    for row, document in zip(rows, codec.open_rows(table, "data", rows, 2), strict=True):
        if row[3] == 1:
            held = [Found(row[0], row[1], document, row[4] if len(row) > 4 else None)]
        else:
            held, ranges_of = members(codec, table, row, document), bounds(row[0]) or []
            first, last = held[0].index, held[-1].index
            if not any(lo <= first and last < hi for lo, hi in ranges_of):  # not all of it
                held = [m for m in held if _overlaps(m.index, m.index + 1, ranges_of)]
        if held and found and held[0].index < found[-1].index:
            ordered = False
        found += held
    return found if ordered else sorted(found, key=lambda f: f.index)


def _overlaps(lo: int, hi: int, ranges: Iterable[tuple[int, int]] | None) -> bool:
    return any(lo < end and start < hi for start, end in ranges or ())


def members(codec: Codec, table: str, row: Sequence[Any], document: bytes) -> list[Found]:
    """The members of a pack (`row`: run_id, first index, stored document, n, ...), or
    `Unreadable` if it does not hold the `n` its row says."""
    run_id, first, _, n = row[:4]
    try:
        if table == messages.name:
            found = [
                Found(run_id, first + i, bytes(m)) for i, m in enumerate(_message_members(document))
            ]
        else:
            found = [
                Found(run_id, m.index, bytes(m.document), m.seq)
                for m in _checkpoint_members(document)
            ]
    except msgspec.DecodeError:
        found = []
    if len(found) != n:
        raise codec.refused((table, "data", run_id, first), f"not a pack of {n}")
    return found


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
                document = _message_pack(d for *_, d in part)
                found.append((part[0][0], roles(r for _, r, _ in part), document, len(part)))
        at = end - first
    return found + [(*row, 1) for row in rows[at:]]


async def pack_settled(db: Database, run: Run, first: int) -> None:
    """Pack the windows that `run`'s last save (its messages from `first` to its
    message_count) completed or ended and that earlier saves began (those it wrote whole
    it wrote packed). Packing changes no document: one that fails (an outage, a full
    disk, another writer's) leaves the rows as they were; a run in flight packs them at
    its next save in this process (`db.unpacked`), a stopped run's stay rows."""
    # from where an earlier packing of the run failed, if one did: else a window it
    # left would stay rows for ever (no later save completes it again)
    since = min(first, db.unpacked.pop(run.run_id, first))
    windows_ = [(lo, end) for lo, end in windows(run, since) if lo < first]
    if not windows_:
        return
    try:
        async with db.write() as conn:
            for lo, end in windows_:
                await _pack(conn, db.codec, run, messages.name, lo, end)
                await _pack(conn, db.codec, run, checkpoints.name, lo, end)
    except Exception as exc:
        # the save stands whatever happens here: given up (an outage, another writer's
        # packing), the rows stay as they were; anything else is a bug, told with its
        # traceback, that must not fail the run
        expected = outage(exc) is not None or isinstance(exc, (IntegrityError, _Moved))
        if expected and run.status in IN_FLIGHT:  # a bug would fail again
            db.unpacked[run.run_id] = since
        level = logging.INFO if expected else logging.ERROR
        log.log(
            level,
            "run %s: windows %s left unpacked: %s",
            run.run_id,
            windows_,
            exc,
            exc_info=not expected,
        )


async def _pack(
    conn: AsyncConnection, codec: Codec, run: Run, table: str, lo: int, hi: int
) -> None:
    """The window's rows (messages [lo, hi), checkpoints (lo, hi]) packed: consecutive
    rows, each under PACK_BYTES, in packs up to it."""
    t, key = _table(table)
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
    t, key = _table(table)
    values: dict[str, Any] = {key.name: first}
    if len(found) == 1:
        document = found[0].document
        if t is messages:
            values["role"] = role_of(document)
        else:
            values["event_seq"] = found[0].seq
    elif t is messages:
        document = _message_pack(f.document for f in found)
        values["role"] = roles(role_of(f.document) for f in found)
    else:
        document = _encode([Mark(f.index, f.seq, msgspec.Raw(f.document)) for f in found])
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
    t, key = _table(table)
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


def _table(table: str) -> tuple[Table, Column[int]]:
    """The table of messages or checkpoints, and its index column."""
    if table == messages.name:
        return messages, messages.c.idx
    return checkpoints, checkpoints.c.message_index


def _message_pack(documents: Iterable[bytes]) -> bytes:
    """A message pack: the JSON array of its members' documents, as they are."""
    return b"[" + b",".join(documents) + b"]"


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
