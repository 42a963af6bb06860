"""What `pip install runpoint` serves, and what its extras add, through the real command:
an installation without an extra is simulated by a `sitecustomize` that makes its
packages impossible to import, as they are where the extra was not installed."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement

from .test_serve_logs import serving
from .test_startup import ROOT, one_line_error, runpoint

EXTRAS = {"openai": ["openai"], "anthropic": ["anthropic"], "postgres": ["asyncpg", "pgqueuer"]}
UNREACHABLE = "postgresql://runpoint@127.0.0.1:1/runpoint"
BLOCKER = """\
import os, sys

BLOCKED = set(os.environ["BLOCKED_PACKAGES"].split(","))


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""


def without(tmp_path: Path, *packages: str) -> dict[str, str]:
    """The environment of a runpoint installed without these packages."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    return {"PYTHONPATH": str(tmp_path), "BLOCKED_PACKAGES": ",".join(packages)}


def test_without_any_extra_it_serves_on_sqlite_with_the_offline_model(tmp_path: Path) -> None:
    env = without(tmp_path, *(p for packages in EXTRAS.values() for p in packages))
    db = str(tmp_path / "x.db")
    with serving(tmp_path / "serve.log", "--db", db, **env) as client:
        run = client.post(
            "/agents/travel-agent/runs",
            data={"message": "Paris", "stream": "false", "session_id": "demo"},
        ).json()
        assert run["status"] == "COMPLETED"
    assert "Traceback" not in (tmp_path / "serve.log").read_text()
    done = runpoint("session", "lock", "demo", "--db", db, **env)
    assert (done.returncode, done.stdout.strip()) == (0, "session demo: locked")


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
    assert extras["all"] == [f"runpoint[{','.join(EXTRAS)}]"]
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
