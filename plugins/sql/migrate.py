"""Schema migrations with Alembic, run on a connection of runpoint's own engine.

Alembic (and the migration scripts it loads) costs a start-up a quarter of a second or
more, so a database is asked its revision first, with one query, and alembic is imported
only when a migration must run. The head revision is the highest-numbered script's: each
script's revision is its file name's four-digit prefix (tests/kernel/test_migrations.py
holds them to it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Connection

SCRIPTS = Path(__file__).parent / "migrations"
HEAD = max(script.name[:4] for script in (SCRIPTS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
# any constant: PostgreSQL serialises concurrent upgrades (several servers starting) on it
_LOCK = 0x72756E70


def config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    cfg.attributes["connection"] = connection
    return cfg


async def current(engine: AsyncEngine) -> set[str]:
    """The revisions the database is at (none: a new database)."""
    async with engine.connect() as conn:
        try:
            rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
        except DBAPIError as exc:  # no such table: nothing was migrated yet
            if "alembic_version" not in str(exc.orig):  # a lost connection, say
                raise
            return set()
        return {version for (version,) in rows}


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    if revision in ("head", HEAD) and await current(engine) == {HEAD}:
        return
    from alembic import command

    async with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK})
        await conn.run_sync(lambda sync: command.upgrade(config(sync), revision))


async def pending(engine: AsyncEngine) -> list[str]:
    """The head revisions the database has not reached (none: its schema is current)."""
    return [] if HEAD in await current(engine) else [HEAD]


def ours(name: str | None, type_: str, parent_names: object) -> bool:
    """Whether a database object is described in schema.py: the run queue's tables are
    pgqueuer's, created by migration 0006 as pgqueuer declares them."""
    from runpoint.plugins.sql.queue import is_queue_table  # only a comparison asks

    return not (type_ == "table" and is_queue_table(name))


async def differences(engine: AsyncEngine) -> list[object]:
    """What the migrated database and the tables in schema.py disagree on (none: good)."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from runpoint.plugins.sql.schema import metadata

    async with engine.connect() as conn:
        return await conn.run_sync(
            lambda sync: compare_metadata(
                MigrationContext.configure(sync, opts={"include_name": ours}), metadata
            )
        )
