"""A loopback HTTP server that plays a script of replies and records what it was sent.

It runs the standard library's threading HTTP server on 127.0.0.1 (a free port) in a
thread, so the SDKs talk real HTTP to it through whatever HTTP layer they ship with.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One HTTP response: a JSON body, Server-Sent Events, or raw bytes."""

    status: int = 200
    body: Any = None
    events: list[tuple[str | None, Any]] | None = None  # (event name, data); str data as is
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds before answering: longer than the client's timeout times out


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    peer: tuple[str, int] | None = None  # the client's end of the connection


# How a scripted item that is not a Reply (a model turn) is answered to a request: in the
# vendor's format, streamed when the request asked for a stream.
Render = Callable[[Any, Request], Reply]


class Loopback:
    def __init__(self, render: Render) -> None:
        self.render = render
        self.script: deque[Any] = deque()
        self.requests: list[Request] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        # a short poll interval: shutting down waits for the serving loop's next look
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def play(self, *items: Any) -> None:
        """Queue replies: Reply objects as they are, anything else through `render`."""
        self.script.extend(items)

    def __enter__(self) -> Loopback:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next(self, request: Request) -> Reply:
        self.requests.append(request)
        if not self.script:
            return Reply(500, {"error": {"message": "the test scripted no more replies"}})
        item = self.script.popleft()
        return item if isinstance(item, Reply) else self.render(item, request)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        loopback = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keeps connections open, as vendors do

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = loopback._next(
                    Request(
                        self.path,
                        {k.lower(): v for k, v in self.headers.items()},
                        body,
                        self.client_address[:2],
                    )
                )
                time.sleep(reply.delay)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(reply)  # unless the client gave up (a timeout test)

            def _send(self, reply: Reply) -> None:
                if reply.events is not None:
                    pieces = [_sse(name, data) for name, data in reply.events]
                    content_type = "text/event-stream"
                else:
                    raw = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                    pieces, content_type = [raw], "application/json"
                self.send_response(reply.status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(sum(map(len, pieces))))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for piece in pieces:  # one event at a time, as a vendor streams
                    self.wfile.write(piece)
                    self.wfile.flush()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _sse(name: str | None, data: Any) -> bytes:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {name}\n" if name else "").encode() + f"data: {text}\n\n".encode()
