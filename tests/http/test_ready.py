"""/health says the process is alive; /ready says it can serve: its database answers,
every migration is applied, and its run queue (PostgreSQL) is running."""

from __future__ import annotations

from litestar import Litestar
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from runpoint.plugins.sql.store import SqlStorage


async def test_ready_when_the_database_is_current(
    client: AsyncTestClient[Litestar], database: str
) -> None:
    assert (await client.get("/health")).json() == {"status": "ok"}
    ready = await client.get("/ready")
    assert ready.status_code == 200
    checks = {"database": "ok", "migrations": "ok"}
    if database.startswith("postgresql"):
        checks["queue"] = "ok"
    assert ready.json() == {"status": "ready", "checks": checks}


async def test_unready_when_a_migration_is_missing(
    client: AsyncTestClient[Litestar], database: str
) -> None:
    storage = SqlStorage(database)  # another process rolled the schema's version back
    try:
        async with storage.engine.begin() as conn:
            await conn.execute(text("UPDATE alembic_version SET version_num = '0001'"))
    finally:
        await storage.close()
    unready = await client.get("/ready")
    assert unready.status_code == 503
    body = unready.json()
    assert body["status"] == "unready"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["migrations"].startswith("not applied: ")


async def test_ready_on_memory() -> None:
    from runpoint.adapters.litestar import create_app
    from runpoint.plugins.demo import agents

    async with AsyncTestClient(create_app(agents, database="memory:")) as client:
        ready = await client.get("/ready")
    assert ready.json() == {"status": "ready", "checks": {"database": "ok"}}
