"""What each SQLite commit puts in its write-ahead log: whole pages, each a frame of the
page size plus a 24-byte header, the last one marked as the commit. Read from the WAL file
itself while checkpoints are held off (a checkpoint lets the WAL start over), and each
page named by the table or index that owns it (SQLite's dbstat table)."""

from __future__ import annotations

import contextlib
import sqlite3
import struct
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import Pool

_WAL_HEADER = 32
_FRAME_HEADER = 24


class Commits(NamedTuple):
    page_size: int
    pages: list[list[int]]  # the page numbers each commit wrote, in order

    def by_owner(self, path: str) -> Counter[str]:
        """Pages written per commit, by the table or index they belong to."""
        owners = _owners(path)
        count = Counter(owners.get(page, "free pages") for pages in self.pages for page in pages)
        return Counter({name: n / len(self.pages) for name, n in count.items()})

    @property
    def wal_bytes(self) -> int:
        return sum(len(pages) for pages in self.pages) * (self.page_size + _FRAME_HEADER)


def hold_checkpoints(engine: AsyncEngine) -> None:
    """No automatic checkpoint on `engine`'s connections (before it first connects)."""
    event.listen(engine.sync_engine, "connect", _hold)


@contextlib.contextmanager
def checkpoints_held() -> Iterator[None]:
    """No automatic checkpoint on the connections any engine makes meanwhile."""
    event.listen(Pool, "connect", _hold)
    try:
        yield
    finally:
        event.remove(Pool, "connect", _hold)


def _hold(connection: Any, _record: Any) -> None:
    connection.execute("PRAGMA wal_autocheckpoint=0")


def commits(path: str) -> Commits:
    """The commits in the WAL of the database file at `path`, since it last started over."""
    with open(f"{path}-wal", "rb") as file:
        wal = file.read()
    (page_size,) = struct.unpack(">I", wal[8:12])
    salts = wal[16:24]  # frames left from before the WAL started over carry older ones
    done: list[list[int]] = []
    pages: list[int] = []
    for start in range(_WAL_HEADER, len(wal) - _FRAME_HEADER, page_size + _FRAME_HEADER):
        page, size_after_commit = struct.unpack(">II", wal[start : start + 8])
        if wal[start + 8 : start + 16] != salts:
            break
        pages.append(page)
        if size_after_commit:
            done.append(pages)
            pages = []
    return Commits(page_size, done)


def _owners(path: str) -> dict[int, str]:
    connection = sqlite3.connect(path)
    try:
        rows = connection.execute("SELECT pageno, name FROM dbstat").fetchall()
        vacuum, size, pages = (
            connection.execute(f"PRAGMA {p}").fetchone()[0]
            for p in ("auto_vacuum", "page_size", "page_count")
        )
    finally:
        connection.close()
    owners = {page: _label(name) for page, name in rows}
    owners[1] = "page 1 (the file's header, its size)"
    if vacuum:  # the pointer map: a page of 5-byte entries for the pages after it
        for page in range(2, pages + 1, size // 5 + 1):
            owners[page] = "pointer-map pages (auto_vacuum)"
    return owners


def _label(name: str) -> str:
    """A B-tree's name, SQLite's own names for the keys of tables said plainly."""
    if name.startswith("sqlite_autoindex_"):
        return f"{name.removeprefix('sqlite_autoindex_').rsplit('_', 1)[0]} (key index)"
    return name
