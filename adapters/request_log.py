"""The operator's log of requests: one line for each, when its response has ended (a
stream's too), with its request id (the X-Request-ID the response carries), method, path,
status and latency in milliseconds. It wraps the whole app, so a 404 for an unknown route
or a refused body is logged like any other."""

from __future__ import annotations

import logging
import time

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from runpoint.adapters.litestar.errors import request_id

log = logging.getLogger("runpoint.requests")


class RequestLog:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)  # no line to write: nothing to note
            return
        started = time.perf_counter()
        fields: dict[str, object] = {
            "request_id": request_id(scope),
            "method": scope["method"],
            # as the client sent it (still percent-encoded), without the query
            "path": scope.get("raw_path", scope["path"].encode()).decode("latin-1"),
            "status": None,  # no response began: the client left first, say
        }

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                fields["status"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            fields["latency_ms"] = round((time.perf_counter() - started) * 1000, 3)
            log.info("request", extra={"fields": fields})
