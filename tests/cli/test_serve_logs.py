"""`runpoint serve` as operators meet it: the environment chooses what it serves, it warns
of agents that cannot run, and it logs each run that ends ERROR in one parseable line."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.serving import await_health, free_port

from .test_startup import COMMAND, ROOT, runpoint


@contextlib.contextmanager
def serving(log: Path, *options: str, **environment: str) -> Iterator[httpx.Client]:
    """`runpoint serve` with RUNPOINT_ variables only, its stderr going to `log`."""
    assert COMMAND
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RUNPOINT_", "OPENAI_"))}
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [COMMAND, "serve", "--port", str(port), *options],
            stderr=stderr,
            env=env | environment,
            cwd=ROOT,
        )
    try:
        base_url = f"http://127.0.0.1:{port}"
        await_health(process, base_url, seconds=60, exited=log.read_text)
        with httpx.Client(base_url=base_url, timeout=30) as client:
            yield client
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_the_environment_chooses_the_agents_and_a_keyless_run_is_logged(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    app = {"RUNPOINT_APP": "tests.cli.agents:keyless", "RUNPOINT_DB": str(tmp_path / "x.db")}
    with serving(log, **app) as client:
        assert [a["id"] for a in client.get("/agents").json()] == ["keyless"]
        run = client.post(
            "/agents/keyless/runs", data={"message": "hi", "stream": "false", "session_id": "s1"}
        ).json()
        assert run["status"] == "ERROR"
    lines = log.read_text().splitlines()
    warnings = [line for line in lines if line.startswith("WARNING")]
    assert len(warnings) == 1
    assert "agent keyless" in warnings[0] and "has no API key" in warnings[0]
    assert "OPENAI_API_KEY" in warnings[0]
    [failed] = [line for line in lines if "run ended ERROR" in line]
    fields = dict(re.findall(r"(\w+)=(\"[^\"]*\"|\S+)", failed))
    assert fields["run_id"] == run["run_id"]
    assert fields["session_id"] == "s1"
    assert fields["agent_id"] == "keyless"
    assert "no API key" in fields["reason"]


def test_a_flag_overrides_the_environment(tmp_path: Path) -> None:
    environment = {"RUNPOINT_APP": "nosuchmod:agents", "RUNPOINT_DB": str(tmp_path / "x.db")}
    refused = runpoint("serve", **environment)
    assert "no module named 'nosuchmod'" in refused.stderr
    with serving(tmp_path / "serve.log", "--app", "runpoint.plugins.demo:agents", **environment):
        pass


def imported(*code: str) -> set[str]:
    """The vendor SDKs imported once `code` ran in a fresh interpreter."""
    check = "import sys; print(sorted({'openai', 'anthropic'} & sys.modules.keys()))"
    done = subprocess.run(
        [sys.executable, "-c", "; ".join([*code, check])],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=True,
    )
    return set(eval(done.stdout.strip().splitlines()[-1]))


def test_vendor_sdks_are_imported_only_for_agents_that_use_them(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    lock = f"from runpoint.adapters.cli import main; main(['session', 'lock', 's', '--db', '{db}'])"
    assert imported(lock) == set()
    demo = "from runpoint.adapters.serving import app_from_env; app_from_env()"
    assert imported(f"import os; os.environ['RUNPOINT_DB'] = '{db}'", demo) == set()
    keyless = "os.environ['RUNPOINT_APP'] = 'tests.cli.agents:keyless'"
    assert imported(f"import os; os.environ['RUNPOINT_DB'] = '{db}'; {keyless}", demo) == {"openai"}
