"""`runpoint db upgrade` brings an empty database to the current schema."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from runpoint.plugins.sql import migrate
from runpoint.plugins.sql.store import SqlStorage


async def test_db_upgrade_applies_every_migration(database: str) -> None:
    command = Path(sys.executable).parent / "runpoint"
    process = await asyncio.create_subprocess_exec(
        command, "db", "upgrade", "--db", database, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await process.communicate()
    assert process.returncode == 0
    assert out.decode().strip() == f"{database}: schema up to date"
    storage = SqlStorage(database)  # not opened: that would migrate
    try:
        assert await migrate.differences(storage.engine) == []
    finally:
        await storage.close()
