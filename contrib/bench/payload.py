"""Stored bytes over the path users take: runs built over HTTP (`POST /agents/{id}/runs`,
`stream=false`, the Litestar app in process) by an `openai-chat:` agent whose vendor is the
zero-latency server of providers.py (its own process), on SQLite.

    .venv/bin/python contrib/bench/payload.py [--sizes 10 100 1000] [--keyring] [--pages]

Each run is one user message, model turns of one tool call each, then an answer (as
providers.py builds them). Per size, a fresh database: the payload stored (every document
the database holds at the end, the bytes as stored, by table) and what this process asked
the disk to write for it, per payload byte: "disk" is the OS's count of the bytes it
wrote (`write_bytes`: its WAL at each commit, and the database file at each checkpoint,
the last one forced at the end; see disk.py). `--keyring` seals the documents
(runpoint.core.sealing). `--pages` builds each run once more with SQLite's checkpoints
held and reads its WAL (walpages.py): the WAL's bytes (the rest of "disk" is the database
file), and the pages each commit wrote, by the table or index they belong to."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import NamedTuple

from databases import _sqlite_file
from disk import written
from providers import agent, vendor_server
from sqlalchemy import LargeBinary, cast, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine
from walpages import Commits, checkpoints_held, commits

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, for tests
from litestar.testing import AsyncTestClient

from runpoint.adapters.litestar import create_app
from runpoint.core.keyring import Keyring
from runpoint.plugins.sql.schema import metadata


async def payload(database: str) -> tuple[Counter[str], int]:
    """The document bytes held now, by table; and the bytes of every value of every column
    (as text, the way the Agno figure is taken: contrib/bench/agno_payload.py)."""
    engine = create_async_engine(database.replace("sqlite:", "sqlite+aiosqlite:", 1))
    documents: Counter[str] = Counter()
    values = 0
    try:
        async with engine.connect() as conn:
            for table in metadata.sorted_tables:
                for column in table.columns:
                    n = await conn.scalar(select(func.sum(func.length(cast(column, LargeBinary)))))
                    values += int(n or 0)
                    if isinstance(column.type, LargeBinary):
                        documents[table.name] += int(n or 0)
    finally:
        await engine.dispose()
    return documents, values


class Built(NamedTuple):
    messages: int
    disk: int  # bytes written (see disk.py)
    pages: Commits | None  # what each commit put in the WAL, if checkpoints were held


async def build(size: int, database: str, keyring: Keyring | None, pages: bool = False) -> Built:
    """One run of `size` messages over HTTP; with `pages`, SQLite's checkpoints held."""
    with checkpoints_held() if pages else contextlib.nullcontext():
        app = create_app([agent("openai-chat")], database=database, keyring=keyring)
        async with AsyncTestClient(app, timeout=600) as client:
            before = await written(database)
            answer = await client.post(
                "/agents/bench/runs",
                data={"message": f"calls: {size // 2 - 1}", "stream": "false"},
            )
            assert answer.status_code == 200, answer.text
            run = answer.json()
            assert run["status"] == "COMPLETED", run
            # the WAL is read before the last connection closes (which empties it)
            wal = commits(make_url(database).database or "") if pages else None
            disk = (await written(database) - before).disk
            assert disk is not None
            detail = await client.get(
                f"/agents/bench/runs/{run['run_id']}", params={"session_id": run["session_id"]}
            )
            return Built(len(detail.json().get("messages") or []), disk, wal)


async def main(sizes: list[int], keyring: bool, page_size: int | None, pages: bool) -> None:
    print(
        f"{'messages':>9} {'payload':>11} {'all values':>11} {'disk':>13} {'disk/payload':>13}"
        "  payload by table"
    )
    with vendor_server(), tempfile.TemporaryDirectory() as tmp:
        keys = Keyring({"bench": os.urandom(32)}) if keyring else None
        for size in sizes:
            database = _new(Path(tmp, f"run_{size}.db"), page_size)
            messages, disk, _ = await build(size, database, keys)
            held, values = await payload(database)
            total = sum(held.values())
            tables = ", ".join(f"{t} {n:,}" for t, n in held.most_common() if n)
            print(
                f"{messages:>9} {total:>11,} {values:>11,} {disk:>13,} {disk / total:>13.1f}"
                f"  {tables}"
            )
            if pages:
                held_at = _new(Path(tmp, f"held_{size}.db"), page_size)
                wal = (await build(size, held_at, keys, pages=True)).pages
                assert wal is not None
                _print_pages(wal, held_at.removeprefix("sqlite:///"), total)


def _new(path: Path, page_size: int | None) -> str:
    if page_size is not None:
        _sqlite_file(path, page_size)
    return f"sqlite:///{path}"


def _print_pages(wal: Commits, path: str, payload: int) -> None:
    writes = sum(map(len, wal.pages))
    print(
        f"{'':>9} built again, checkpoints held: the WAL {wal.wal_bytes:,} bytes"
        f" ({wal.wal_bytes / payload:.1f} per payload byte), {len(wal.pages)} commits of"
        f" {writes / len(wal.pages):.2f} pages of {wal.page_size:,} bytes; pages a commit:"
    )
    for owner, n in wal.by_owner(path).most_common():
        if n >= 0.005:
            print(f"{'':>13}{n:5.2f}  {owner}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10, 100, 1_000])
    parser.add_argument("--keyring", action="store_true", help="seal the documents")
    parser.add_argument("--page-size", type=int, help="make each SQLite file so first")
    parser.add_argument("--pages", action="store_true", help="the WAL's pages, by owner")
    args = parser.parse_args()
    asyncio.run(main(args.sizes, args.keyring, args.page_size, args.pages))
