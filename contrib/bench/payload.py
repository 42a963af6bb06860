"""Stored bytes over the path users take: runs built over HTTP (`POST /agents/{id}/runs`,
`stream=false`, the Litestar app in process) by an `openai-chat:` agent whose vendor is the
zero-latency server of providers.py (its own process), on SQLite.

    .venv/bin/python contrib/bench/payload.py [--sizes 10 100 1000] [--keyring]

Each run is one user message, model turns of one tool call each, then an answer (as
providers.py builds them). Per size, a fresh database: the payload stored (every document
the database holds at the end, the bytes as stored, by table) and what this process asked
the disk to write for it (its WAL, and the database file at checkpoints: see disk.py),
per payload byte. `--keyring` seals the documents (runpoint.core.sealing)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

from databases import _sqlite_file
from disk import written
from providers import agent, vendor_server
from sqlalchemy import LargeBinary, cast, func, select
from sqlalchemy.ext.asyncio import create_async_engine

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


async def build(size: int, database: str, keyring: Keyring | None) -> tuple[int, int]:
    """(messages, disk bytes written) of one run of `size` messages over HTTP."""
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
        disk = (await written(database) - before).disk
        assert disk is not None
        detail = await client.get(
            f"/agents/bench/runs/{run['run_id']}", params={"session_id": run["session_id"]}
        )
        return len(detail.json().get("messages") or []), disk


async def main(sizes: list[int], keyring: bool, page_size: int | None) -> None:
    print(
        f"{'messages':>9} {'payload':>11} {'all values':>11} {'disk':>13} {'disk/payload':>13}"
        "  payload by table"
    )
    with vendor_server(), tempfile.TemporaryDirectory() as tmp:
        keys = Keyring({"bench": os.urandom(32)}) if keyring else None
        for size in sizes:
            path = Path(tmp, f"run_{size}.db")
            if page_size is not None:
                _sqlite_file(path, page_size)
            database = f"sqlite:///{path}"
            messages, disk = await build(size, database, keys)
            held, values = await payload(database)
            total = sum(held.values())
            tables = ", ".join(f"{t} {n:,}" for t, n in held.most_common() if n)
            print(
                f"{messages:>9} {total:>11,} {values:>11,} {disk:>13,} {disk / total:>13.1f}"
                f"  {tables}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10, 100, 1_000])
    parser.add_argument("--keyring", action="store_true", help="seal the documents")
    parser.add_argument("--page-size", type=int, help="make each SQLite file so first")
    args = parser.parse_args()
    asyncio.run(main(args.sizes, args.keyring, args.page_size))
