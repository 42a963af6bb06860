"""What `pip install runpoint` serves, and what its extras add, through the real command.

An installation without an extra is simulated by a `sitecustomize` that makes the extra's
packages impossible to import, as they are where it was not installed; it also records the
modules a process loaded: a start pays for each package it imports, so a migration tool, a
vendor's SDK, a database driver or a test tool is imported only by what needs it."""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from .test_serve_logs import serving
from .test_startup import ROOT, one_line_error, runpoint

EXTRAS = {"openai": ["openai"], "anthropic": ["anthropic"], "postgres": ["asyncpg", "pgqueuer"]}
# each costs a start a tenth of a second or more, or belongs to the tests
NEEDED_ONLY_SOMETIMES = {
    "alembic",  # only when a migration must run
    "jwt",  # only with a JWT key
    "schemathesis",  # never
    "hypothesis",
    "pytest",
}
UNREACHABLE = "postgresql://runpoint@127.0.0.1:1/runpoint"
SITECUSTOMIZE = """\
import atexit, os, sys, threading, time

BLOCKED = set(os.environ["BLOCKED_PACKAGES"].split(","))
RECORD = os.environ.get("RECORD_IMPORTS_TO")


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def record():
    with open(RECORD + ".part", "w") as out:
        out.write("\\n".join(list(sys.modules)))
    os.replace(RECORD + ".part", RECORD)


def when_asked():  # a server ends by a signal, not through atexit
    while not os.path.exists(RECORD + ".now"):
        time.sleep(0.05)
    record()


sys.meta_path.insert(0, NotInstalled())
if RECORD:
    atexit.register(record)
    threading.Thread(target=when_asked, daemon=True).start()
"""


def without(tmp_path: Path, *packages: str, record: Path | None = None) -> dict[str, str]:
    """The environment of a runpoint installed without these packages; its processes
    write the modules they loaded to `record` when they exit (or when a file named like
    it, with `.now`, appears)."""
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {"PYTHONPATH": str(tmp_path), "BLOCKED_PACKAGES": ",".join(packages)}
    return env | ({"RECORD_IMPORTS_TO": str(record)} if record else {})


def imported(record: Path) -> set[str]:
    """The packages a process recorded having loaded that it should load only sometimes."""
    return {m.partition(".")[0] for m in record.read_text().split()} & NEEDED_ONLY_SOMETIMES


def test_without_any_extra_it_serves_on_sqlite_importing_only_what_it_uses(
    tmp_path: Path,
) -> None:
    def env(record: str) -> dict[str, str]:
        extras = (p for packages in EXTRAS.values() for p in packages)
        return without(tmp_path, *extras, record=tmp_path / f"{record}.imports")

    db = str(tmp_path / "x.db")
    assert runpoint("db", "upgrade", "--db", db, **env("upgrade")).returncode == 0
    assert imported(tmp_path / "upgrade.imports") == {"alembic"}  # a new database: migrated

    with serving(tmp_path / "serve.log", "--db", db, **env("serve")) as client:
        run = client.post(
            "/agents/travel-agent/runs",
            data={"message": "Paris", "stream": "false", "session_id": "demo"},
        ).json()
        assert run["status"] == "COMPLETED"
        (tmp_path / "serve.imports.now").touch()
        deadline = time.monotonic() + 30
        while not (tmp_path / "serve.imports").exists():
            assert time.monotonic() < deadline, "runpoint serve did not record its imports"
            time.sleep(0.05)
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
    assert imported(tmp_path / "serve.imports") == set()

    done = runpoint("session", "lock", "demo", "--db", db, **env("lock"))
    assert (done.returncode, done.stdout.strip()) == (0, "session demo: locked")
    assert imported(tmp_path / "lock.imports") == set()


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        (["serve", "--app", "tests.cli.agents:keyless", "--db", "memory:"], "openai"),
        (["serve", "--app", "tests.cli.agents:claude", "--db", "memory:"], "anthropic"),
        (["serve", "--db", UNREACHABLE], "postgres"),
        (["db", "upgrade", "--db", UNREACHABLE], "postgres"),
        (["session", "lock", "s1", "--db", UNREACHABLE], "postgres"),
    ],
)
def test_what_needs_a_missing_extra_says_the_pip_command_in_one_line(
    tmp_path: Path, command: list[str], extra: str
) -> None:
    line = one_line_error(runpoint(*command, **without(tmp_path, *EXTRAS[extra])))
    assert line.endswith(f"is not installed: pip install 'runpoint[{extra}]'"), line


def declared(pyproject: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(pyproject.read_text())["project"]
    return project


def names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name for r in requirements}


def test_a_plugin_depending_on_runpoint_pulls_no_vendor_sdk_nor_database_driver() -> None:
    runpoint_ = declared(ROOT / "pyproject.toml")
    plugin = declared(ROOT / "contrib/every_n_turns/pyproject.toml")
    assert plugin["dependencies"] == ["runpoint"]  # no extra
    core, extras = names(runpoint_["dependencies"]), runpoint_["optional-dependencies"]
    assert {"sqlalchemy", "aiosqlite", "litestar", "uvicorn"} <= core
    for extra, packages in EXTRAS.items():
        assert not core & set(packages), extra
        assert names(extras[extra]) == set(packages), extra
    telemetry = {"opentelemetry-api", "opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-http"}
    assert names(extras["otel"]) == telemetry | {"prometheus-client"}
    assert not core & names(extras["otel"])
    assert extras["all"] == [f"runpoint[{','.join([*EXTRAS, 'otel'])}]"]
    assert "runpoint[all]" in extras["dev"]


def test_the_imports_blocked_here_are_blocked(tmp_path: Path) -> None:
    # the simulation itself: an import of a blocked package fails as a missing one does
    env = without(tmp_path, "openai")
    done = subprocess.run(
        [sys.executable, "-c", "import openai"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert "ModuleNotFoundError: No module named 'openai'" in done.stderr
