"""`runpoint serve` as operators meet it: the environment chooses what it serves, it warns
of agents that cannot run, and it logs each request and each run that ends ERROR in one
parseable line, as text or (--log-format json) every line a JSON object."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def requests_made(client: httpx.Client) -> list[httpx.Response]:
    """A request of each kind: answered, failing, streamed, with the client's request id,
    and one whose path a log line must not take as it is (a newline, a space, a quote)."""
    return [
        client.get("/agents"),
        client.get("/sessions/nope/runs"),
        client.get('/no%0Aroute here"', headers={"X-Request-ID": "mine 1"}),
        client.post("/agents/keyless/runs", data={"message": "hi", "session_id": "s2"}),
    ]


def assert_logged(requests: list[dict[str, Any]], responses: list[httpx.Response]) -> None:
    """Each response was logged once, in order, with its id, method, path and status."""
    assert [r["request_id"] for r in requests] == [x.headers["x-request-id"] for x in responses]
    assert [r["method"] for r in requests] == [x.request.method for x in responses]
    assert [r["path"] for r in requests] == [x.request.url.raw_path.decode() for x in responses]
    assert [str(r["status"]) for r in requests] == [str(x.status_code) for x in responses]
    assert responses[2].headers["x-request-id"] == "mine 1"
    assert all(0 < float(str(r["latency_ms"])) < 30_000 for r in requests)


def answered(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The requests logged, but those to /health (made while waiting for the server)."""
    return [r for r in requests if r["path"] != "/health"]


def fields(line: str) -> dict[str, str]:
    """The `key=value` fields of a text log line, a quoted value unquoted."""
    return {
        k: json.loads(v) if v.startswith('"') else v
        for k, v in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', line)
    }


def test_flags_override_the_environment_and_each_request_and_failed_run_is_a_line(
    tmp_path: Path,
) -> None:
    log, db = tmp_path / "serve.log", tmp_path / "x.db"
    environment = {"RUNPOINT_APP": "nosuchmod:agents", "RUNPOINT_DB": str(db)}
    refused = runpoint("serve", **environment)
    assert "no module named 'nosuchmod'" in refused.stderr
    with serving(log, "--app", "tests.cli.agents:keyless", **environment) as client:
        assert db.exists()  # the environment's
        assert [a["id"] for a in client.get("/agents").json()] == ["keyless"]  # the flag's
        run = client.post(
            "/agents/keyless/runs", data={"message": "hi", "stream": "false", "session_id": "s1"}
        ).json()
        assert run["status"] == "ERROR"
        responses = requests_made(client)
    lines = log.read_text().splitlines()
    warnings = [line for line in lines if line.startswith("WARNING")]
    assert len(warnings) == 1
    assert "agent keyless" in warnings[0] and "has no API key" in warnings[0]
    assert "OPENAI_API_KEY" in warnings[0]
    [failed, _] = [line for line in lines if "run ended ERROR" in line]
    assert failed.startswith("ERROR     runpoint.runs: run ended ERROR ")
    ended = fields(failed)
    assert ended["run_id"] == run["run_id"]
    assert ended["session_id"] == "s1"
    assert ended["agent_id"] == "keyless"
    assert "no API key" in ended["reason"]
    requests = [fields(line) for line in lines if line.startswith("INFO      runpoint.requests: ")]
    assert_logged(answered(requests)[2:], responses)  # after the two above


def test_json_logs_are_one_object_a_line_every_line(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with serving(
        log,
        RUNPOINT_APP="tests.cli.agents:keyless",
        RUNPOINT_DB=str(tmp_path / "x.db"),
        RUNPOINT_LOG_FORMAT="json",
    ) as client:
        responses = requests_made(client)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert {line["logger"] for line in lines} == {
        "runpoint.serve",  # the warning of a keyless agent
        "uvicorn.error",  # uvicorn's own: started, listening, stopped
        "runpoint.requests",
        "runpoint.runs",
    }
    assert all(line["time"].endswith("+00:00") and line["message"] for line in lines)
    [failed] = [line for line in lines if line["logger"] == "runpoint.runs"]
    assert failed["level"] == "ERROR" and failed["message"] == "run ended ERROR"
    assert failed["session_id"] == "s2" and failed["agent_id"] == "keyless"
    assert f'"run_id":"{failed["run_id"]}"' in responses[3].text  # the streamed run's
    assert "no API key" in failed["reason"]
    assert_logged(
        answered([line for line in lines if line["logger"] == "runpoint.requests"]), responses
    )


def test_an_agent_on_a_deprecated_model_is_a_warning_at_start(tmp_path: Path) -> None:
    """The Anthropic SDK warns of a deprecated model on each `messages.create` (a
    DeprecationWarning, which a server hides); runpoint sends its own body, and says it once."""
    from tests.cli.deprecated_agents import END_OF_LIFE, MODEL

    log = tmp_path / "serve.log"
    app, key = "tests.cli.deprecated_agents:agents", {"ANTHROPIC_API_KEY": "sk-test"}
    with serving(log, "--app", app, "--db", "memory:", **key) as client:
        assert [a["id"] for a in client.get("/agents").json()] == ["old"]
    [warning] = [line for line in log.read_text().splitlines() if line.startswith("WARNING")]
    assert warning.endswith(
        f"agent old: model anthropic:{MODEL} is deprecated: it reaches end-of-life on {END_OF_LIFE}"
    )
