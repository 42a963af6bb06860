"""Fixtures shared by every test package.

Every test that takes `database` runs twice: on SQLite and on a real PostgreSQL server
(started for the session from the machine's binaries, or RUNPOINT_TEST_POSTGRES). Where
there is no PostgreSQL those runs are left out, with one line in the summary, unless
RUNPOINT_REQUIRE_POSTGRES is set, which makes its absence an error. A module whose subject
is not storage marks itself `pytest.mark.memory` and runs once, on the in-memory backend
(what every backend must do is the storage conformance suite's, tests/storage).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from runpoint.facade import Runpoint
from runpoint.seams.agent import Agent
from tests import postgres
from tests.directory_state import DirectoryState
from tests.serving import serving

pytest_plugins = ("tests.hangs",)

OpenRunpoint = Callable[[Iterable[Agent]], Awaitable[Runpoint]]
BACKENDS = ("sqlite", "postgresql")


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get(postgres.REQUIRE_ENV) and not postgres.available():
        raise pytest.UsageError(
            f"{postgres.REQUIRE_ENV} is set, but there is no PostgreSQL: install it, "
            f"or point {postgres.URL_ENV} at a server"
        )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if postgres.available():
        return
    left_out = [i for i in items if "[postgresql" in i.name or "-postgresql" in i.name]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [i for i in items if i not in left_out]
        config.stash[_LEFT_OUT] = len(left_out)


_LEFT_OUT = pytest.StashKey[int]()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if left_out := terminalreporter.config.stash.get(_LEFT_OUT, 0):
        terminalreporter.write_line(
            f"PostgreSQL not found: {left_out} tests ran on SQLite only "
            f"(install postgresql or set {postgres.URL_ENV} to run them on both)"
        )


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    if url := os.environ.get(postgres.URL_ENV):
        yield url
        return
    bin_dir = postgres.binaries()
    assert bin_dir is not None
    server = postgres.TemporaryServer(bin_dir)
    try:
        yield server.start()
    finally:
        server.stop()


def _admin(url: str, statement: str) -> None:
    async def execute() -> None:
        connection = await asyncpg.connect(url)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    # in a thread of its own: this one may be running a loop already (Playwright's sync API)
    with ThreadPoolExecutor(1) as thread:
        thread.submit(asyncio.run, execute()).result()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    chosen = any(
        "database" in marker.args[0] for marker in metafunc.definition.iter_markers("parametrize")
    )  # a test that names its backends itself (PostgreSQL only, say)
    if "database" in metafunc.fixturenames and not chosen:
        memory = metafunc.definition.get_closest_marker("memory") is not None
        metafunc.parametrize("database", ["memory"] if memory else BACKENDS, indirect=True)


@pytest.fixture
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database URL on each backend the test runs on."""
    with fresh_database(request, tmp_path) as url:
        yield url


@contextlib.contextmanager
def fresh_database(request: pytest.FixtureRequest, directory: Path) -> Iterator[str]:
    """A fresh, empty database URL on the backend `request.param` names: a file in
    `directory`, or a database of the test server dropped afterwards, or a new in-memory
    store."""
    if request.param == "memory":
        yield "memory:"
        return
    if request.param == "sqlite":
        yield f"sqlite:///{directory / 'runpoint.db'}"
        return
    server: str = request.getfixturevalue("postgres_url")
    name = f"test_{uuid.uuid4().hex[:16]}"
    _admin(server, f'CREATE DATABASE "{name}"')
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        _admin(server, f'DROP DATABASE "{name}" WITH (FORCE)')


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


@pytest.fixture
def state(tmp_path: Path) -> DirectoryState:
    """A state-capture plugin keeping each session's files in a directory."""
    return DirectoryState(tmp_path / "sandboxes")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`runpoint serve` (the demo agents) on a free loopback port with a fresh database,
    one for each test module that asks for it."""
    with serving(tmp_path_factory.mktemp("serve") / "runpoint.db") as base_url:
        yield base_url
