"""Schema migrations with Alembic, run on a connection of runpoint's own engine."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import AsyncEngine

from runpoint.plugins.sql.queue import is_queue_table
from runpoint.plugins.sql.schema import metadata

SCRIPTS = Path(__file__).parent / "migrations"
# any constant: PostgreSQL serialises concurrent upgrades (several servers starting) on it
_LOCK = 0x72756E70


def config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    cfg.attributes["connection"] = connection
    return cfg


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})
        await conn.run_sync(lambda sync: command.upgrade(config(sync), revision))


async def pending(engine: AsyncEngine) -> list[str]:
    """The head revisions the database has not reached (none: its schema is current)."""
    async with engine.connect() as conn:
        current = await conn.run_sync(
            lambda sync: MigrationContext.configure(sync).get_current_heads()
        )
    return sorted(set(ScriptDirectory.from_config(config()).get_heads()) - set(current))


def ours(name: str | None, type_: str, parent_names: object) -> bool:
    """Whether a database object is described in schema.py: the run queue's tables are
    pgqueuer's, created by migration 0006 as pgqueuer declares them."""
    return not (type_ == "table" and is_queue_table(name))


async def differences(engine: AsyncEngine) -> list[object]:
    """What the migrated database and the tables in schema.py disagree on (none: good)."""
    async with engine.connect() as conn:
        return await conn.run_sync(
            lambda sync: compare_metadata(
                MigrationContext.configure(sync, opts={"include_name": ours}), metadata
            )
        )
