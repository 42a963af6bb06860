"""Bytes a database wrote to disk, read from outside runpoint.

The figure is the OS's `write_bytes` (/proc/<pid>/io): the bytes of the page-cache pages a
process dirtied, whether or not they were flushed yet. For SQLite that is this process
(its WAL at each commit, its database file at each checkpoint); for PostgreSQL the
server's processes, beside the WAL bytes it logged. A reading writes out what is pending
first (a checkpoint), so that what a write costs the database file later is counted.

Linux counts a dirtied page cache *folio* whole. A file appended to is cached in small
folios, and SQLite's WAL is counted as the frames it holds; but a file written in place
after being cached whole may be held in folios of up to 2 MiB, and a write of 8 KiB into
one after it was flushed counts all of it, while the disk is sent only the blocks written
(on this machine's 6.18 kernel: 200 bytes and an fdatasync into a 16 MiB file written
before count 2 MiB, and the disk's own counter grows by about 6 KiB). PostgreSQL writes its
WAL that way, into segments it fills with zeros first: its count is far above what reaches
the disk, and its WAL bytes are the figure to read."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import NamedTuple

from pgserver import checkpoint, postmaster_pid, wal_position, write_bytes
from sqlalchemy.engine import make_url


class Written(NamedTuple):
    disk: int | None  # the OS's write_bytes (None: not readable here)
    wal: int | None = None  # PostgreSQL: WAL bytes logged

    def __sub__(self, earlier: object) -> Written:
        assert isinstance(earlier, Written)
        return Written(*(_less(now, then) for now, then in zip(self, earlier, strict=True)))


def _less(now: int | None, then: int | None) -> int | None:
    return None if now is None or then is None else now - then


async def written(database: str) -> Written:
    """The counters now, after a checkpoint."""
    url = make_url(database)
    if url.get_backend_name() == "sqlite":
        assert url.database is not None
        await asyncio.to_thread(_truncate_wal, url.database)
        return Written(own_write_bytes())
    await checkpoint(database)
    return Written(write_bytes(await postmaster_pid(database)), await wal_position(database))


def own_write_bytes() -> int:
    with open("/proc/self/io") as file:
        fields = dict(line.split(": ") for line in file.read().splitlines())
    return int(fields["write_bytes"])


def _truncate_wal(path: str) -> None:
    """Copy SQLite's WAL into the database file and empty it."""
    connection = sqlite3.connect(path)
    try:
        busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert not busy, "a checkpoint of the whole WAL was refused"
    finally:
        connection.close()
