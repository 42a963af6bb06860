"""A run's settled rows, packed: once a save takes a run's messages past a multiple of
WINDOW, the window's messages are kept in one row (a pack), and its checkpoints in
another; so is the last window of a run that stopped (ended or paused), if half full.
Packs are written by `packing`; this module is what a pack is and how rows are read.
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
with the others (`packing.thin`)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec
from sqlalchemy import (
    BindParameter,
    Column,
    ColumnElement,
    Select,
    Table,
    and_,
    bindparam,
    or_,
    select,
)

from runpoint.core.sealing import Codec
from runpoint.plugins.sql.schema import checkpoints, messages

WINDOW = 64  # message indexes: no pack spans a multiple of it

Range = tuple[str, int, int]  # run_id, lo, hi
MessageRow = tuple[int, str, bytes, int]  # index, role, document, n


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


def table_of(table: str) -> tuple[Table, Column[int]]:
    """The table of messages or checkpoints, and its index column."""
    if table == messages.name:
        return messages, messages.c.idx
    return checkpoints, checkpoints.c.message_index


def message_pack(documents: Iterable[bytes]) -> bytes:
    """A message pack: the JSON array of its members' documents, as they are."""
    return b"[" + b",".join(documents) + b"]"


def checkpoint_pack(marks: Iterable[Mark]) -> bytes:
    """A checkpoint pack: the JSON array of its members as `Mark`s."""
    return _encode(list(marks))
