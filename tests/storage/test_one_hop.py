"""SQLite statements make one trip to their connection's thread (`plugins/sql/one_hop.py`)
and leave SQLAlchemy what the driver's own cursor did: rows, row counts, errors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from sqlalchemy import exc
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from runpoint.plugins.sql.one_hop import OneHopDbapi


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path}/t.db", module=OneHopDbapi())
    yield engine
    await engine.dispose()


@pytest.fixture
def trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The calls made in connections' threads, by name."""
    made: list[str] = []
    run = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(fn.__name__)
        return await run(self, fn, *args, **kwargs)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    return made


async def test_a_statement_is_one_trip_with_its_rows_and_counts(
    engine: AsyncEngine, trips: list[str]
) -> None:
    async with engine.begin() as conn:
        await conn.exec_driver_sql("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT UNIQUE)")
        trips.clear()
        inserted = await conn.exec_driver_sql("INSERT INTO t (v) VALUES ('a')")
        assert trips == ["_run"]
        assert inserted.lastrowid == 1
        await conn.exec_driver_sql("INSERT INTO t (v) VALUES (?)", [("b",), ("c",)])
        updated = await conn.exec_driver_sql("UPDATE t SET v = v || '!' WHERE id > 1")
        assert updated.rowcount == 2
        trips.clear()
        rows = await conn.exec_driver_sql("SELECT id, v FROM t ORDER BY id")
        assert trips == ["_run"]
        assert [tuple(r) for r in rows] == [(1, "a"), (2, "b!"), (3, "c!")]
        assert list(rows.keys()) == ["id", "v"]  # the description kept
        returned = await conn.exec_driver_sql("DELETE FROM t WHERE id = 3 RETURNING v")
        assert returned.scalar_one() == "c!"


async def test_errors_are_the_drivers_as_sqlalchemy_maps_them(engine: AsyncEngine) -> None:
    async with engine.begin() as conn:
        await conn.exec_driver_sql("CREATE TABLE u (v TEXT UNIQUE)")
        await conn.exec_driver_sql("INSERT INTO u VALUES ('a')")
        with pytest.raises(exc.IntegrityError):
            await conn.exec_driver_sql("INSERT INTO u VALUES ('a')")
        with pytest.raises(exc.OperationalError):
            await conn.exec_driver_sql("SELECT nothing FROM nowhere")
        assert (await conn.exec_driver_sql("SELECT count(*) FROM u")).scalar() == 1
