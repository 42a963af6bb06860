"""The Litestar app, built from openapi.yaml at start-up: one route per operation, with the
document's path and method, its inputs validated by the document's schemas, served by the
handler of the operation's id. An operation without a handler, a handler without an
operation, or a handler whose arguments are not the operation's inputs fails here."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from litestar import Request, Response
from litestar.enums import HttpMethod
from litestar.file_system import BaseLocalFileSystem
from litestar.handlers import HTTPRouteHandler
from litestar.middleware import ASGIMiddleware
from litestar.middleware.rate_limit import RateLimitConfig
from litestar.static_files import create_static_files_router
from litestar.types import FileInfo, PathType

from runpoint.adapters import console
from runpoint.adapters.auth import Auth
from runpoint.adapters.settings import DEFAULTS
from runpoint.adapters.telemetry import observers
from runpoint.adapters.tracing import Tracing
from runpoint.core.errors import RunpointError
from runpoint.facade import Runpoint
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost

# each module of handlers registers them as it is imported
from . import (  # noqa: F401
    approvals,
    branches,
    inputs,
    queue,
    reference,
    runs,
    schedules,
    session_checkpoints,
    sessions,
    sse,
    team_trees,
    teams,
)
from .documents import Documents
from .embedding import RunpointApp
from .errors import EXCEPTION_HANDLERS, add_request_id
from .handlers import HANDLERS
from .security import PUBLIC, Authenticate, FailureBudget, HostPrincipal, cors
from .spec import JSON, Operation, SpecError, document, operations
from .wire import encode

Endpoint = Callable[[Request[Any, Any, Any]], Awaitable[Response[Any]]]
Given = dict[str, object]


@dataclass(frozen=True)
class PerRequest:
    """A given value that depends on the request (the document, on its prefix)."""

    read: Callable[[Request[Any, Any, Any]], object]


# a given that is the names of the inputs the request carried (absent ones are None too):
# a PATCH tells a field it leaves alone from one it sets to null
SENT = object()


def create_app(
    agents: Iterable[Agent],
    *,
    database: str,
    auth: Auth | None = None,
    rate_limit: RateLimitConfig | None = None,
    max_body_bytes: int = DEFAULTS.max_body_bytes,
    keepalive_seconds: float = DEFAULTS.keepalive_seconds,
    cors_origins: str | None = DEFAULTS.cors_origins,
    principal: HostPrincipal | None = None,
    root_path: str = "",
    **options: Any,
) -> RunpointApp:
    """The app serving `agents` from `database` (a SQLite file's path, `sqlite:///PATH`,
    `postgresql://...` or `memory:`, as `--db` takes it);
    `options` go to `Runpoint` (lease_seconds, ...). Its metrics are kept if
    prometheus_client is installed, unless `host` says otherwise."""
    options.setdefault("host", PluginHost(observers()))
    runpoint = Runpoint(agents, database=database, **options)
    return build(
        runpoint,
        auth=auth,
        rate_limit=rate_limit,
        max_body_bytes=max_body_bytes,
        keepalive_seconds=keepalive_seconds,
        cors_origins=cors_origins,
        principal=principal,
        root_path=root_path,
    )


def build(
    rp: Runpoint,
    doc: dict[str, Any] | None = None,
    *,
    auth: Auth | None = None,
    rate_limit: RateLimitConfig | None = None,
    max_body_bytes: int = DEFAULTS.max_body_bytes,
    keepalive_seconds: float = DEFAULTS.keepalive_seconds,
    cors_origins: str | None = DEFAULTS.cors_origins,
    principal: HostPrincipal | None = None,
    root_path: str = "",
) -> RunpointApp:
    """Serve `rp` over the operations of `doc` (the checked-in document by default), to
    the principals `auth` knows (anyone without it), at most as often as `rate_limit` says
    (as often as they like without it; it budgets each address's failed authentications
    alike), with bodies of at most `max_body_bytes`; an event stream quiet for
    `keepalive_seconds` sends a comment; browsers at `cors_origins` (a comma-separated
    list, or "*") may call it. If `rp` traces (its host has a `Tracing`), each
    request is a span, the parent of the runs it starts. An app that embeds it may say
    who each request's `principal` is (see `Authenticate`); `root_path` is the prefix it
    is served under where the server does not say (see `embedding.prefixed`)."""
    doc = doc or document()
    auth = auth or Auth()
    # what of the app's own state a handler may name: the run documents it keeps (each
    # app its own: two apps in a process may serve two databases), the document it serves
    served = reference.Served(reference.served(doc, open_=auth.is_open))
    given: Given = {"documents": Documents(), "openapi_json": PerRequest(served), "sent": SENT}
    ops = operations(doc)
    ids = {op.operation_id for op in ops}
    if missing := sorted(ids - HANDLERS.keys()):
        raise SpecError(f"operations without a handler: {', '.join(missing)}")
    if extra := sorted(HANDLERS.keys() - ids):
        raise SpecError(f"handlers without an operation: {', '.join(extra)}")
    paths: dict[str, list[Operation]] = {}
    for op in ops:
        paths.setdefault(op.path, []).append(op)
    # The console's static files at /ui: not an operation of the document, a client of them
    # (anyone may load them; what they call asks for credentials like any client's calls).
    ui = create_static_files_router(
        "/ui",
        [console.DIRECTORY],
        file_system=ConsoleFiles(),
        html_mode=True,
        name="console",
        opt={PUBLIC: True},
    )
    tracing = rp.host.find(Tracing)
    return RunpointApp(
        rp,
        root_path=root_path,
        route_handlers=[
            *(
                _route(rp, path, path_ops, given, keepalive_seconds)
                for path, path_ops in paths.items()
            ),
            ui,
            *reference.routes(served),
        ],
        middleware=[
            *([_request_spans(tracing)] if tracing else []),  # a refused request is one too
            Authenticate(auth, FailureBudget.of(rate_limit) if rate_limit else None, principal),
            *([rate_limit.middleware] if rate_limit else []),
        ],
        cors_config=cors(cors_origins) if cors_origins else None,
        request_max_body_size=max_body_bytes,
        exception_handlers=EXCEPTION_HANDLERS,
        before_send=[add_request_id],
        openapi_config=None,  # the document the app is built from is served instead
        logging_config=None,  # logging is the application's to configure (runpoint serve's)
    )


def _request_spans(tracing: Tracing) -> ASGIMiddleware:
    from .request_spans import RequestSpans  # imports opentelemetry: only an app that traces

    return RequestSpans(tracing.tracer)


class ConsoleFiles(BaseLocalFileSystem):
    """The console's directory, where a path the system cannot even look up (one with a
    NUL, a name too long) is simply not there: a 404, not Litestar's 500."""

    async def info(self, path: PathType, **kwargs: Any) -> FileInfo:
        try:
            return await super().info(path, **kwargs)
        except (OSError, ValueError) as exc:  # os.stat: ValueError for a NUL
            raise FileNotFoundError(str(path)) from exc


def _endpoint(rp: Runpoint, op: Operation, given: Given, keepalive: float) -> Endpoint:
    handler = HANDLERS[op.operation_id]
    arguments = list(inspect.signature(handler).parameters)[1:]
    state = {name: given[name] for name in arguments if name in given}
    if (taken := sorted(set(arguments) - state.keys())) != sorted(f.name for f in op.fields):
        raise SpecError(
            f"{op.operation_id}: the handler takes {taken}, "
            f"the operation has {sorted(f.name for f in op.fields)}"
        )

    async def endpoint(request: Request[Any, Any, Any]) -> Response[Any]:
        values, sent = await inputs.read(request, op)
        known = {
            k: sent if v is SENT else v.read(request) if isinstance(v, PerRequest) else v
            for k, v in state.items()
        }
        try:
            reply = await handler(rp, **known, **values)
        except RunpointError:
            raise
        except Exception as exc:  # the database's outage is no failure of the request
            if (outage := rp.outages.of(exc)) is not None:
                raise outage from exc
            raise
        if isinstance(reply, Response):
            return reply
        if isinstance(reply, sse.EventStream):
            return reply.response(keepalive)
        body = b"" if reply is None else encode(reply)
        return Response(body, status_code=op.status, media_type=JSON)

    return endpoint


def _route(
    rp: Runpoint, path: str, ops: list[Operation], given: Given, keepalive: float
) -> HTTPRouteHandler:
    """One Litestar route per path, whatever its methods (Litestar answers OPTIONS with a
    stale Allow header when one path is registered in parts)."""
    if len({op.public for op in ops}) > 1:
        raise SpecError(f"{path}: some of its operations are public and some are not")
    endpoints = {op.method: _endpoint(rp, op, given, keepalive) for op in ops}

    async def route(request: Request[Any, Any, Any]) -> Response[Any]:
        return await endpoints[request.method](request)

    # `{name}` becomes `{name:str}`: the document, not the router, types parameters. The
    # status is the Response's; 200 only keeps Litestar from refusing a DELETE's body type.
    handler = HTTPRouteHandler(
        re.sub(r"\{(\w+)\}", r"{\1:str}", path),
        http_method=[HttpMethod(method) for method in endpoints],
        status_code=200,
        opt={PUBLIC: ops[0].public},
    )
    return handler(route)
