"""Every error, in the dialect of the request's path: the run dialect's `{detail,
error_code}`, or under /v2/ the session dialect's `{id, message, request_id}`. Every
response carries an X-Request-ID header, which the session dialect's errors repeat.

Whatever raises it (the services' RunpointErrors, the adapter's HttpError, Litestar's own
HTTPExceptions: unknown routes, rate limits, body limits, authentication), an error is
rendered here, in one place."""

from __future__ import annotations

import logging
import uuid
from http import HTTPStatus
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException
from litestar.types import ExceptionHandlersMap, Message, Scope

from runpoint.core.errors import (
    ConfigurationError,
    Conflict,
    Forbidden,
    InvalidArguments,
    InvalidBoundary,
    InvalidRequest,
    Locked,
    NotContinuable,
    NotFound,
    RunpointError,
    StorageFull,
    Unavailable,
)

from .embedding import route_path
from .wire import encode

log = logging.getLogger("runpoint.http")

SESSION_DIALECT = "/v2/"
# Most specific first: a subclass of one of these maps like its base.
STATUS: dict[type[RunpointError], tuple[int, str]] = {
    NotFound: (404, "NOT_FOUND"),
    Forbidden: (403, "FORBIDDEN"),  # the session dialect's; the run dialect's is a 404
    InvalidBoundary: (400, "INVALID_BOUNDARY"),
    InvalidRequest: (400, "BAD_REQUEST"),
    InvalidArguments: (422, "VALIDATION_ERROR"),
    ConfigurationError: (400, "BAD_REQUEST"),  # e.g. an unknown `model` asked for
    NotContinuable: (409, "NOT_CONTINUABLE"),
    Conflict: (409, "CONFLICT"),
    Locked: (423, "LOCKED"),
    StorageFull: (507, "STORAGE_FULL"),
    Unavailable: (503, "DATABASE_UNAVAILABLE"),
}
_HTTP_CODES = {
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "REQUEST_ENTITY_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    423: "LOCKED",
    429: "TOO_MANY_REQUESTS",
}
# the session dialect's `id`: the status in words (others are HTTPStatus's phrase)
_SESSION_IDS = {413: "payload_too_large", 422: "unprocessable_entity", 500: "internal"}
_MAX_REQUEST_ID = 200
_REQUEST_ID = "runpoint.request_id"


class HttpError(Exception):
    """A request the adapter refuses before it reaches the services."""

    def __init__(self, status: int, error_code: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.error_code = error_code
        self.detail = detail


def request_id(scope: Scope) -> str:
    """The request's id: the client's X-Request-ID if it is reasonable, else a new one;
    the same for the whole request."""
    state = scope.setdefault("state", {})
    if (known := state.get(_REQUEST_ID)) is None:
        given = next((v for k, v in scope["headers"] if k == b"x-request-id"), b"")
        ok = 0 < len(given) <= _MAX_REQUEST_ID
        known = state[_REQUEST_ID] = given.decode("latin-1") if ok else uuid.uuid4().hex
    return str(known)


def error_response(
    request: Request[Any, Any, Any],
    status: int,
    error_code: str,
    detail: str,
    headers: dict[str, str] | None = None,
) -> Response[bytes]:
    if route_path(request.scope).startswith(SESSION_DIALECT):
        body = encode(
            {"id": _session_id(status), "message": detail, "request_id": request_id(request.scope)}
        )
    else:
        body = encode({"detail": detail, "error_code": error_code})
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def on_http_error(request: Request[Any, Any, Any], exc: HttpError) -> Response[bytes]:
    return error_response(request, exc.status, exc.error_code, exc.detail)


def on_runpoint_error(request: Request[Any, Any, Any], exc: RunpointError) -> Response[bytes]:
    if isinstance(exc, Forbidden) and not route_path(request.scope).startswith(SESSION_DIALECT):
        # another team's: the run dialect answers as if it did not exist
        exc = NotFound(f"{exc.kind} {exc.id} not found")
    status, code = next(v for t, v in STATUS.items() if isinstance(exc, t))
    if isinstance(exc, Unavailable):  # the client may come back: when
        return error_response(
            request, status, code, str(exc), {"Retry-After": str(exc.retry_after)}
        )
    return error_response(request, status, code, str(exc))


def on_litestar_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    """Litestar's refusals: unknown path (404), method (405), unreadable or too large a body
    (413), no credentials (401) or scope (403), too many requests (429)."""
    status = exc.status_code
    code = _HTTP_CODES.get(status, "BAD_REQUEST" if status < 500 else "INTERNAL_SERVER_ERROR")
    headers = dict(exc.headers or {})
    if "RateLimit-Reset" in headers:  # the limiter says when the window resets: so do we
        headers["Retry-After"] = str(max(1, int(headers["RateLimit-Reset"])))
    return error_response(request, status, code, exc.detail, headers)


def on_unexpected_error(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(request, 500, "INTERNAL_SERVER_ERROR", "Internal server error")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    HttpError: on_http_error,
    RunpointError: on_runpoint_error,
    HTTPException: on_litestar_error,
    Exception: on_unexpected_error,
}


async def add_request_id(message: Message, scope: Scope) -> None:
    if message["type"] == "http.response.start":
        # added, not looked for among the others first (no response of ours sets it)
        given = message.get("headers", ())
        message["headers"] = [*given, (b"x-request-id", request_id(scope).encode("latin-1"))]


def _session_id(status: int) -> str:
    if status in _SESSION_IDS:
        return _SESSION_IDS[status]
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "internal" if status >= 500 else "bad_request"
