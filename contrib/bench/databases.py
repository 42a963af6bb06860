"""Fresh, empty databases for benchmarks: SQLite files (of a page size of their own, if
asked: a deployment makes its file so before runpoint first opens it, see the README), or
databases on a throwaway PostgreSQL server started from the machine's binaries
(tests/postgres.py)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any

import asyncpg

sys.path.insert(0, str(Path(__file__).parents[2]))  # the repository, for tests.postgres
from tests import postgres

NewDatabase = Callable[[str], Coroutine[Any, Any, str]]


@contextlib.contextmanager
def databases(
    on_postgres: bool,
    directory: Path,
    page_size: int | None = None,
    settings: Mapping[str, str] = {},
) -> Iterator[NewDatabase]:
    """Yields `new(name) -> url`, making an empty database each time (on PostgreSQL, on a
    server of `settings`)."""
    if not on_postgres:

        async def new_file(name: str) -> str:
            path = directory / f"{name}.db"
            if page_size is not None:
                _sqlite_file(path, page_size)
            return f"sqlite:///{path}"

        yield new_file
        return
    bin_dir = postgres.binaries()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (apt-get install postgresql)")
    server = postgres.TemporaryServer(bin_dir, durable=True, settings=settings)
    admin = server.start()

    async def new_database(name: str) -> str:
        connection = await asyncpg.connect(admin)
        try:
            await connection.execute(f'CREATE DATABASE "{name}"')
        finally:
            await connection.close()
        return admin.rsplit("/", 1)[0] + f"/{name}"

    try:
        yield new_database
    finally:
        server.stop()


def _sqlite_file(path: Path, page_size: int) -> None:
    """An empty SQLite file of `page_size` (fixed once the file has a page: WAL mode writes it)."""
    connection = sqlite3.connect(path)
    try:
        connection.execute(f"PRAGMA page_size={page_size}")
        connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()


def run_on_databases(
    description: str, main: Callable[[NewDatabase], Coroutine[Any, Any, None]]
) -> None:
    """A benchmark's command line: `main` on SQLite files, or with --postgres on databases of
    a throwaway PostgreSQL."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--postgres", action="store_true", help="run on a temporary PostgreSQL")
    parser.add_argument("--page-size", type=int, help="SQLite: the files' page size")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        databases(args.postgres, Path(tmp), args.page_size) as new,
    ):
        asyncio.run(main(new))
