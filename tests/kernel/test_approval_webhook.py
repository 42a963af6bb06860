"""The example webhook plugin (contrib/approval_webhook): each approval a paused run asks
for is posted to a real loopback HTTP server, off the run's path; a webhook that fails
holds nothing up."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from runpoint.core.types import RunStatus
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.seams.host import PluginHost
from runpoint_approval_webhook import ApprovalWebhook

pytestmark = pytest.mark.memory  # storage is not the subject here


class Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.bodies: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hook"


class Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        self.server.bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


async def test_each_approval_is_posted(database: str, receiver: Receiver) -> None:
    webhook = ApprovalWebhook(receiver.url)
    async with Runpoint(agents, database=database, host=PluginHost([webhook])) as rp:
        handle = await rp.create_run(CreateRun(agent_id="booking-agent", message="Book Paris"))
        run = await handle.result()
        assert run.status is RunStatus.PAUSED
        await asyncio.gather(*webhook.sending)
    [body] = receiver.bodies
    assert body["run_id"] == run.run_id and body["status"] == "pending"
    assert body["calls"][0]["tool_args"] == {"city": "Paris"}
    assert body["resolve"] == f"/approvals/{body['id']}/resolve"


async def test_a_failing_webhook_holds_nothing_up(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    webhook = ApprovalWebhook("http://127.0.0.1:9/nobody-listens", timeout=2)
    async with Runpoint(agents, database=database, host=PluginHost([webhook])) as rp:
        handle = await rp.create_run(CreateRun(agent_id="booking-agent", message="Book Paris"))
        assert (await handle.result()).status is RunStatus.PAUSED
        await asyncio.gather(*webhook.sending)
    assert "webhook http://127.0.0.1:9/nobody-listens failed" in caplog.text
