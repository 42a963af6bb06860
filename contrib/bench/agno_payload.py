"""What Agno stores for the runs payload.py builds: the same vendor server (providers.py),
the same transcript (one user message, model turns of one tool call each, an answer), run
by an Agno 3.1.10 `Agent` (`OpenAIChat`, a `SqliteDb`) in this process.

    .venv/bin/python contrib/bench/agno_payload.py [--sizes 10 100 1000]

Per size, a fresh database: the bytes of every value of every column Agno's tables hold
at the end (as text; Agno keeps a run as JSON columns), and what this process asked the
disk to write for the run (see disk.py), per byte held."""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import tempfile
from pathlib import Path

from disk import written
from providers import vendor_server


def echo(value: str) -> str:
    """Return the value."""
    return value


def held(path: Path) -> int:
    connection = sqlite3.connect(path)
    try:
        tables = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        total = 0
        for (table,) in tables.fetchall():
            for column in connection.execute(f"PRAGMA table_info({table})").fetchall():
                total += connection.execute(
                    f"SELECT coalesce(sum(length(CAST({column[1]} AS BLOB))), 0) FROM {table}"
                ).fetchone()[0]
        return int(total)
    finally:
        connection.close()


async def build(size: int, path: Path) -> tuple[int, int, int]:
    """(messages, bytes held for it, disk bytes written) of one Agno run of `size`
    messages."""
    from agno.agent import Agent
    from agno.db.sqlite import SqliteDb
    from agno.models.openai import OpenAIChat

    model = OpenAIChat(id="gpt-4o", base_url=os.environ["OPENAI_BASE_URL"], api_key="sk-bench")
    agent = Agent(id="bench", model=model, tools=[echo], db=SqliteDb(db_file=str(path)))
    database = f"sqlite:///{path}"
    agent.run("calls: 0")  # Agno makes its tables at its first run: not this run's bytes
    before, earlier = await written(database), held(path)
    run = await asyncio.to_thread(agent.run, f"calls: {size // 2 - 1}")
    disk = (await written(database) - before).disk
    assert disk is not None
    return len(run.messages or []), held(path) - earlier, disk


async def main(sizes: list[int]) -> None:
    print(f"{'messages':>9} {'held':>11} {'disk':>13} {'disk/held':>10}")
    with vendor_server(), tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            messages, total, disk = await build(size, Path(tmp, f"agno_{size}.db"))
            print(f"{messages:>9} {total:>11,} {disk:>13,} {disk / total:>10.1f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10, 100, 1_000])
    asyncio.run(main(parser.parse_args().sizes))
