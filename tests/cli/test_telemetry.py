"""Telemetry through the real command: `runpoint serve --otel` sends its spans over OTLP to a
collector on loopback, set up by the standard OTEL_* variables; a server without the
`otel` extra serves all the same, and one not asked to trace loads none of it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from .test_serve_logs import serving
from .test_startup import ROOT, one_line_error, runpoint


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP trace receiver: keeps the spans of each export."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Receive)
        self.spans: list[tuple[dict[str, str], Span]] = []  # (resource attributes, span)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Receive(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:
        assert self.path == "/v1/traces"
        body = self.rfile.read(int(self.headers["Content-Length"]))
        for resource in ExportTraceServiceRequest.FromString(body).resource_spans:
            attributes = {a.key: a.value.string_value for a in resource.resource.attributes}
            for scope in resource.scope_spans:
                self.server.spans.extend((attributes, span) for span in scope.spans)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()


def test_serve_with_otel_sends_a_runs_spans_to_the_collector(
    tmp_path: Path, collector: Collector
) -> None:
    otel = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # milliseconds between exports, not five seconds
        "RUNPOINT_DB": str(tmp_path / "x.db"),
    }
    with serving(tmp_path / "serve.log", "--otel", **otel) as client:
        data = {"message": "Paris", "stream": "false", "session_id": "s1"}
        run = client.post("/agents/travel-agent/runs", data=data).json()
        deadline = time.monotonic() + 20
        while "POST /agents/{agent_id}/runs" not in {s.name for _, s in collector.spans}:
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.05)
    spans = {span.name: (resource, span) for resource, span in collector.spans}
    resource, request = spans["POST /agents/{agent_id}/runs"]
    assert resource["service.name"] == "runpoint"
    _, execution = spans["invoke_agent travel-agent"]
    assert execution.parent_span_id == request.span_id
    ids = {"runpoint.run_id": run["run_id"], "runpoint.session_id": "s1"}
    ids["runpoint.agent_id"] = "travel-agent"
    attributes = {a.key: a.value.string_value for a in execution.attributes}
    assert attributes.items() >= ids.items()
    for name in ("chat demo", "execute_tool get_population", "write_checkpoint"):
        assert spans[name][1].parent_span_id == execution.span_id, name


def test_an_exporter_runpoint_cannot_set_up_is_one_line_and_status_2(tmp_path: Path) -> None:
    done = runpoint(
        "serve", "--otel", "--db", str(tmp_path / "x.db"), OTEL_TRACES_EXPORTER="otlp,zipkin"
    )
    assert "OTEL_TRACES_EXPORTER names zipkin: runpoint sets up otlp, console, none" in (
        one_line_error(done)
    )


# The interpreter as it is without the extra: neither package can be imported.
WITHOUT_EXTRA = "import sys; sys.modules['opentelemetry'] = sys.modules['prometheus_client'] = None"
LOADED = "sorted(m for m in sys.modules if m.startswith(('prometheus_client', 'opentelemetry.')))"


def python(*code: str, **environment: str) -> dict[str, object]:
    """What the last line of `code`, run in a fresh interpreter, printed as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(ROOT)} | environment,
        check=True,
    )
    answer: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def test_without_the_extra_runpoint_serves_and_says_what_it_lacks(tmp_path: Path) -> None:
    answer = python(
        WITHOUT_EXTRA,
        "import contextlib, io, json",
        "from litestar.testing import TestClient",
        "from runpoint.adapters.cli import main",
        "from runpoint.adapters.serving import app_from_env",
        "with TestClient(app_from_env()) as client:",
        "    data = {'message': 'Paris', 'stream': 'false'}",
        "    run = client.post('/agents/travel-agent/runs', data=data).json()",
        "    scrape = client.get('/metrics')",
        "said = io.StringIO()",
        "with contextlib.redirect_stderr(said):",
        "    status = main(['serve', '--otel'])",
        "print(json.dumps({'run': run['status'], 'metrics': scrape.status_code,",
        "    'detail': scrape.json()['detail'], 'otel': [status, said.getvalue()]}))",
        RUNPOINT_DB=str(tmp_path / "x.db"),
    )
    assert answer["run"] == "COMPLETED"
    assert answer["metrics"] == 501
    assert "pip install 'runpoint[otel]'" in str(answer["detail"])
    assert answer["otel"] == [
        2,
        "runpoint serve: tracing needs OpenTelemetry's SDK, and opentelemetry is not "
        "installed: pip install 'runpoint[otel]'\n",
    ]


def test_a_server_not_asked_to_trace_loads_neither_package_to_start(tmp_path: Path) -> None:
    answer = python(
        "import json, sys",
        "from runpoint.adapters.serving import app_from_env",
        "app_from_env()",
        f"print(json.dumps({{'loaded': {LOADED}}}))",
        RUNPOINT_DB=str(tmp_path / "x.db"),
    )
    # (Litestar looks for its own OpenTelemetry plugin, and finds only the conventions' names)
    loaded = answer["loaded"]
    assert isinstance(loaded, list)
    assert [m for m in loaded if not m.startswith("opentelemetry.semconv")] == []
