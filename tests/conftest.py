"""Fixtures shared by every test package."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path

import pytest

from runpoint.agent import Agent
from runpoint.services import Runpoint

OpenRunpoint = Callable[[Iterable[Agent]], Awaitable[Runpoint]]


@pytest.fixture
def database(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runpoint.db'}"


@pytest.fixture
async def open_runpoint(database: str) -> AsyncIterator[OpenRunpoint]:
    """Open a Runpoint on the test's database; closed when the test ends."""
    opened: list[Runpoint] = []

    async def open_(agents: Iterable[Agent]) -> Runpoint:
        runpoint = await Runpoint(agents, database=database).open()
        opened.append(runpoint)
        return runpoint

    yield open_
    for runpoint in opened:
        await runpoint.close()
