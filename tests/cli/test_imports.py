"""What a command imports, through the real command: a start-up pays for each package it
imports, so a migration tool, a vendor's SDK, a database driver or a test tool is imported
only by what needs it. A `sitecustomize` records the modules loaded when the process ends."""

from __future__ import annotations

import time
from pathlib import Path

from .test_serve_logs import serving
from .test_startup import runpoint

# each costs a start-up a tenth of a second or more, or belongs to the tests
NEEDED_ONLY_SOMETIMES = {
    "alembic",  # only when a migration must run
    "openai",  # only for an agent on that vendor
    "anthropic",
    "asyncpg",  # only on PostgreSQL
    "pgqueuer",
    "jwt",  # only with a JWT key
    "schemathesis",  # never
    "hypothesis",
    "pytest",
}
RECORDER = """\
import atexit, os, sys, threading, time

RECORD = os.environ["RECORD_IMPORTS_TO"]


def record():
    with open(RECORD + ".part", "w") as out:
        out.write("\\n".join(list(sys.modules)))
    os.replace(RECORD + ".part", RECORD)


def when_asked():  # a server ends by a signal, not through atexit
    while not os.path.exists(RECORD + ".now"):
        time.sleep(0.05)
    record()


atexit.register(record)
threading.Thread(target=when_asked, daemon=True).start()
"""


def recording(tmp_path: Path, name: str) -> tuple[Path, dict[str, str]]:
    """Where the modules a process loaded will be (at its exit, or once a file named
    like it with `.now` appears), and the environment that records them."""
    (tmp_path / "sitecustomize.py").write_text(RECORDER)
    record = tmp_path / f"{name}.imports"
    return record, {"PYTHONPATH": str(tmp_path), "RECORD_IMPORTS_TO": str(record)}


def packages(record: Path) -> set[str]:
    return {module.partition(".")[0] for module in record.read_text().split()}


def test_what_a_command_imports(tmp_path: Path) -> None:
    db = str(tmp_path / "x.db")
    record, env = recording(tmp_path, "upgrade")
    assert runpoint("db", "upgrade", "--db", db, **env).returncode == 0
    assert packages(record) & NEEDED_ONLY_SOMETIMES == {"alembic"}  # a new database

    record, env = recording(tmp_path, "lock")
    assert runpoint("session", "lock", "s1", "--db", db, **env).returncode == 1  # no such session
    assert packages(record) & NEEDED_ONLY_SOMETIMES == set()

    record, env = recording(tmp_path, "serve")
    with serving(tmp_path / "serve.log", "--app", "tests.cli.agents:keyless", "--db", db, **env):
        record.with_suffix(".imports.now").touch()  # it answers /health: it has started
        deadline = time.monotonic() + 30
        while not record.exists():
            assert time.monotonic() < deadline, "runpoint serve did not record its imports"
            time.sleep(0.05)
    assert packages(record) & NEEDED_ONLY_SOMETIMES == {"openai"}
