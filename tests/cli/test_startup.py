"""`runpoint` through the real command: its options, their environment variables, and
start-up errors as one line on stderr with exit status 2."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

COMMAND = shutil.which("runpoint", path=str(Path(sys.executable).parent))
ROOT = Path(__file__).parents[2]


def runpoint(*args: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """The command with these arguments and RUNPOINT_ variables only (it should exit)."""
    assert COMMAND
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOINT_")} | environment
    return subprocess.run(
        [COMMAND, *args], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT
    )


def test_version() -> None:
    done = runpoint("--version")
    assert done.returncode == 0
    assert done.stdout.strip().startswith("runpoint 0.")


def test_every_serve_option_has_help_and_a_variable() -> None:
    help_ = runpoint("serve", "--help").stdout
    for flag, variable in [
        ("--app", "RUNPOINT_APP"),
        ("--db", "RUNPOINT_DB"),
        ("--host", "RUNPOINT_HOST"),
        ("--port", "RUNPOINT_PORT"),
        ("--workers", "RUNPOINT_WORKERS"),
        ("--log-level", "RUNPOINT_LOG_LEVEL"),
        ("--lease-seconds", "RUNPOINT_LEASE_SECONDS"),
        ("--rate-limit", "RUNPOINT_RATE_LIMIT"),
        ("--retain-runs", "RUNPOINT_RETAIN_RUNS"),
        ("--retain-checkpoints", "RUNPOINT_RETAIN_CHECKPOINTS"),
        ("--retain-events", "RUNPOINT_RETAIN_EVENTS"),
        ("--sweep-seconds", "RUNPOINT_SWEEP_SECONDS"),
        ("--sweep-batch", "RUNPOINT_SWEEP_BATCH"),
    ]:
        assert flag in help_ and f"${variable}" in help_, flag


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--app", "nosuchmod:agents"], "no module named 'nosuchmod'"),
        (["--app", "runpoint.plugins.demo:nope"], "has no 'nope'"),
        (["--app", "demo"], "--app wants module:attribute"),
        (["--db", "mysql://user@host/runpoint"], "no storage named 'mysql'"),
        (["--db", "/nonexistent/directory/runpoint.db"], "no directory /nonexistent/directory"),
        (["--db", "postgresql://user:hunter2@127.0.0.1:1/runpoint"], "cannot open the database"),
        (["--rate-limit", "lots"], "a rate limit is COUNT/UNIT"),
        (["--retain-runs", "soon"], "--retain-runs: 'soon' is not a duration"),
        (["--retain-events=-3d"], "--retain-events: '-3d' is not a duration"),
        (["--retain-checkpoints", "some"], "--retain-checkpoints: 'some' is not a count"),
        (["--sweep-batch", "0"], "a sweep reads 1 run or more"),
    ],
)
def test_a_bad_start_up_input_is_one_line_and_status_2(options: list[str], says: str) -> None:
    line = one_line_error(runpoint("serve", *options))
    assert line.startswith("runpoint serve: ")
    assert says in line
    assert "hunter2" not in line


@pytest.mark.parametrize(
    "command",
    [["db", "upgrade"], ["db", "prune"], ["session", "lock", "s1"], ["session", "unlock", "s1"]],
)
@pytest.mark.parametrize(
    ("db", "says"),
    [
        ("postgresql://user:hunter2@127.0.0.1:1/runpoint", "cannot open the database"),
        ("mysql://user@host/runpoint", "no storage named 'mysql'"),
        ("/nonexistent/directory/runpoint.db", "no directory /nonexistent/directory"),
    ],
)
def test_a_database_command_given_a_bad_database_is_one_line_and_status_2(
    command: list[str], db: str, says: str
) -> None:
    line = one_line_error(runpoint(*command, "--db", db))
    assert line.startswith(f"runpoint {' '.join(command[:2])}: ")
    assert says in line
    assert "hunter2" not in line


def test_a_bad_retention_variable_is_one_line_and_status_2() -> None:
    line = one_line_error(runpoint("db", "prune", "--db", "memory:", RUNPOINT_RETAIN_RUNS="1y"))
    assert line == (
        "runpoint db prune: --retain-runs: '1y' is not a duration (30d, 12h, 90m, 45s or never)"
    )


def test_two_plugins_registering_one_name_is_one_line_and_status_2(tmp_path: Path) -> None:
    # a distribution on the path whose plugin registers the built-in policies' names again
    (tmp_path / "twice.py").write_text("from runpoint.plugins.policies import *  # noqa\n")
    info = tmp_path / "twice-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: twice\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[runpoint]\ntwice = twice\n")
    line = one_line_error(runpoint("serve", "--db", "memory:", PYTHONPATH=str(tmp_path)))
    assert line.startswith("runpoint serve: ")
    assert "twice" in line
