"""A server span for each request, as OpenTelemetry's HTTP conventions describe one: named by
the operation's route (`POST /agents/{agent_id}/runs`), continuing the trace a `traceparent`
header names, and current while the request is served, so that the runs it starts are its
children. Imported only when the app traces (see runpoint.adapters.tracing)."""

from __future__ import annotations

import re

from litestar.datastructures import Headers
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from opentelemetry import propagate
from opentelemetry.trace import SpanKind, StatusCode, Tracer

_TYPED = re.compile(r":\w+\}")  # the router's `{run_id:str}` is the document's `{run_id}`


class RequestSpans(ASGIMiddleware):
    scopes = (ScopeType.HTTP,)

    def __init__(self, tracer: Tracer) -> None:
        self.tracer = tracer

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        method = scope["method"]  # type: ignore[typeddict-item]
        route = _TYPED.sub("}", scope["path_template"])
        status = 500  # unless a response starts

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with self.tracer.start_as_current_span(
            f"{method} {route}",
            context=propagate.extract(Headers.from_scope(scope)),
            kind=SpanKind.SERVER,
            attributes={
                "http.request.method": method,
                "http.route": route,
                "url.path": scope["path"],
                "url.scheme": scope["scheme"],
            },
            record_exception=False,  # a 401 or a 429 is an answer, not a failure
            set_status_on_exception=False,
        ) as span:
            try:
                await next_app(scope, receive, sending)
            except HTTPException as exc:  # a refusal (401, 403, 429), answered further out
                status = exc.status_code
                raise
            except Exception as exc:
                span.record_exception(exc)
                raise
            finally:
                span.set_attribute("http.response.status_code", status)
                if status >= 500:
                    span.set_status(StatusCode.ERROR)
