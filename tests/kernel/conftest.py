"""Fixtures of the kernel's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from runpoint.plugins.sql.store import SqlStorage


@pytest.fixture
async def storage(database: str) -> AsyncIterator[SqlStorage]:
    """The SQL storage of `database`, open (migrated)."""
    opened = SqlStorage(database)
    await opened.open()
    yield opened
    await opened.close()
