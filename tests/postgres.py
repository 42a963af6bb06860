"""A throwaway PostgreSQL server for the tests, started from the machine's own binaries.

RUNPOINT_TEST_POSTGRES=postgresql://... uses a server you run instead. PostgreSQL refuses
to run as root, so as root the server runs as the `postgres` user.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

from tests.serving import free_port

URL_ENV = "RUNPOINT_TEST_POSTGRES"
REQUIRE_ENV = "RUNPOINT_REQUIRE_POSTGRES"


def binaries() -> Path | None:
    """The newest PostgreSQL server's bin directory on this machine, if any."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _version(path: str) -> int:
    return int(Path(path).parts[-3]) if Path(path).parts[-3].isdigit() else 0


def available() -> bool:
    return bool(os.environ.get(URL_ENV)) or binaries() is not None


class TemporaryServer:
    """initdb into a temporary directory, start on a free loopback port, stop and delete."""

    def __init__(
        self, bin_dir: Path, *, durable: bool = False, settings: Mapping[str, str] = {}
    ) -> None:
        self.bin_dir = bin_dir
        self.durable = durable  # tests trade crash safety of the server itself for speed
        self.settings = settings  # more of the server's settings (-c name=value)
        self.root = Path(tempfile.mkdtemp(prefix="runpoint-pg-"))
        self.data = self.root / "data"
        self.port = free_port()  # the same port again after a restart
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.options = ""

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self.root)

    def start(self) -> str:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        )
        if not self.durable:
            options += " -c fsync=off -c full_page_writes=off"
        options += "".join(f" -c {name}={value}" for name, value in self.settings.items())
        self.options = options
        self.start_again()
        return self.url

    def crash(self) -> None:
        """Stop the server as a crash would (`pg_ctl stop -m immediate`): every connection
        cut, the data kept for `start_again`."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def start_again(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-o", self.options, "-w", "-l", "log", "start")

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def dsn(database: str) -> str:
    """What asyncpg connects to for a database named by a SQLAlchemy URL."""
    return make_url(database).set(drivername="postgresql").render_as_string(False)


async def fetch_value(database: str, query: str) -> Any:
    """The one value a query reads from a database named by a SQLAlchemy URL."""
    connection = await asyncpg.connect(dsn(database))
    try:
        return await connection.fetchval(query)
    finally:
        await connection.close()
