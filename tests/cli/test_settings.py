"""`runpoint serve`'s settings as one value: a flag wins over its variable and a variable
over the default; worker processes (--workers) serve what the flags said though nothing
wrote them into an environment; every setting is documented."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from runpoint.adapters.cli import parser
from runpoint.adapters.settings import DEFAULTS, VARIABLES, Settings
from runpoint.facade import Runpoint
from runpoint.plugins.demo import agents
from tests.http.conftest import bearer, write_keys
from tests.serving import await_health, free_port

from .test_startup import COMMAND, ROOT

RUNS = "/agents/travel-agent/runs"


def settings(*flags: str) -> Settings:
    return Settings.of(parser().parse_args(["serve", *flags]))


@pytest.fixture(autouse=True)
def no_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in VARIABLES.values():
        monkeypatch.delenv(variable, raising=False)


def test_a_flag_wins_over_its_variable_and_a_variable_over_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert settings() == DEFAULTS == Settings.from_environment()
    monkeypatch.setenv("RUNPOINT_PORT", "8000")
    monkeypatch.setenv("RUNPOINT_LEASE_SECONDS", "5")
    monkeypatch.setenv("RUNPOINT_OTEL", "yes")
    monkeypatch.setenv("RUNPOINT_API_KEYS_FILE", "keys.yaml")
    said = settings("--port", "9000")
    assert (said.port, said.lease_seconds, said.otel, said.api_keys) == (9000, 5, True, "keys.yaml")
    assert settings().port == Settings.from_environment().port == 8000
    monkeypatch.setenv("RUNPOINT_OTEL", "0")
    assert not settings().otel


def test_a_bad_variable_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOINT_WORKERS", "many")
    with pytest.raises(SystemExit) as exited:
        Settings.from_environment()
    assert exited.value.code == 2


def test_a_secret_comes_from_its_variable_only_and_is_not_shown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RUNPOINT_JWT_SECRET", "hunter2")
    said = settings()
    assert said.jwt_secret == "hunter2"
    assert "hunter2" not in repr(said)
    assert "--jwt-secret" not in parser().format_help()


async def test_the_kernel_holds_runs_as_long_as_serve_does_by_default() -> None:
    async with Runpoint(agents, database="memory:") as rp:
        assert rp.leases.lease_seconds == DEFAULTS.lease_seconds


def test_every_setting_is_documented_with_its_flag_variable_and_default() -> None:
    rows = (ROOT / "docs" / "operations.md").read_text().splitlines()
    for field in dataclasses.fields(Settings):
        row = next((line for line in rows if f"`{VARIABLES[field.name]}`" in line), "")
        assert row, field.name
        if field.name != "jwt_secret":  # a secret has no flag
            assert f"`--{field.name.replace('_', '-')}`" in row
        if field.default not in (None, False):
            assert f"`{field.default}`" in row, field.name


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid`."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            if f"\nPPid:\t{pid}\n" in status.read_text():
                found.append(int(status.parent.name))
        except OSError:  # it ended as we looked
            continue
    return found


def test_workers_serve_the_flags_given_and_have_no_runpoint_variables(tmp_path: Path) -> None:
    assert COMMAND
    keys = write_keys(tmp_path / "keys.yaml")
    port = free_port()
    options = ["--workers", "2", "--port", str(port), "--db", str(tmp_path / "runpoint.db")]
    options += ["--api-keys", str(keys), "--max-body-bytes", "2000", "--log-level", "warning"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOINT_")}
    process = subprocess.Popen([COMMAND, "serve", *options], env=env, cwd=ROOT)
    try:
        base_url = f"http://127.0.0.1:{port}"
        await_health(process, base_url, seconds=60)
        with httpx.Client(base_url=base_url, timeout=30) as client:
            for _ in range(6):  # the two workers take connections as they come
                assert client.get("/sessions").status_code == 401
                alpha = bearer("alpha-key")
                assert client.get("/sessions", headers=alpha).status_code == 200
                big = {"message": "x" * 3000}
                assert client.post(RUNS, json=big, headers=alpha).status_code == 413
        workers = children(process.pid)
        assert len(workers) >= 2
        for worker in workers:
            environment = (Path("/proc") / str(worker) / "environ").read_bytes().split(b"\0")
            assert not [v for v in environment if v.startswith(b"RUNPOINT_")], worker
    finally:
        process.terminate()
        process.wait(timeout=30)
