"""Every error as the run dialect's `{detail, error_code}` body, and the X-Request-ID header
every response carries."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from litestar import Request, Response
from litestar.datastructures import MutableScopeHeaders
from litestar.exceptions import HTTPException
from litestar.types import ExceptionHandlersMap, Message, Scope

from runpoint.errors import (
    ConfigurationError,
    Conflict,
    Forbidden,
    InvalidBoundary,
    InvalidRequest,
    NotContinuable,
    NotFound,
    RunpointError,
)

from .wire import encode

log = logging.getLogger("runpoint.http")

# Most specific first: a subclass of one of these maps like its base.
STATUS: dict[type[RunpointError], tuple[int, str]] = {
    NotFound: (404, "NOT_FOUND"),
    InvalidBoundary: (400, "INVALID_BOUNDARY"),
    InvalidRequest: (400, "BAD_REQUEST"),
    ConfigurationError: (400, "BAD_REQUEST"),  # e.g. an unknown `model` asked for
    NotContinuable: (409, "NOT_CONTINUABLE"),
    Conflict: (409, "CONFLICT"),
}
_HTTP_CODES = {
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "REQUEST_ENTITY_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    429: "TOO_MANY_REQUESTS",
}
_MAX_REQUEST_ID = 200


class HttpError(Exception):
    """A request the adapter refuses before it reaches the services."""

    def __init__(self, status: int, error_code: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.error_code = error_code
        self.detail = detail


def error_response(
    status: int, error_code: str, detail: str, headers: dict[str, str] | None = None
) -> Response[bytes]:
    body = encode({"detail": detail, "error_code": error_code})
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def on_http_error(_: Request[Any, Any, Any], exc: HttpError) -> Response[bytes]:
    return error_response(exc.status, exc.error_code, exc.detail)


def on_runpoint_error(_: Request[Any, Any, Any], exc: RunpointError) -> Response[bytes]:
    if isinstance(exc, Forbidden):  # another team's: as if it did not exist, not a 403
        exc = exc.hidden
    status, code = next(v for t, v in STATUS.items() if isinstance(exc, t))
    return error_response(status, code, str(exc))


def on_litestar_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[bytes]:
    """Litestar's refusals: unknown path (404), method (405), unreadable or too large a body
    (413), no credentials (401) or scope (403), too many requests (429)."""
    status = exc.status_code
    code = _HTTP_CODES.get(status, "BAD_REQUEST" if status < 500 else "INTERNAL_SERVER_ERROR")
    headers = dict(exc.headers or {})
    if "RateLimit-Reset" in headers:  # the limiter says when the window resets: so do we
        headers["Retry-After"] = str(max(1, int(headers["RateLimit-Reset"])))
    return error_response(status, code, exc.detail, headers)


def on_unexpected_error(request: Request[Any, Any, Any], exc: Exception) -> Response[bytes]:
    log.exception("%s %s failed", request.method, request.url.path, exc_info=exc)
    return error_response(500, "INTERNAL_SERVER_ERROR", "Internal server error")


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    HttpError: on_http_error,
    RunpointError: on_runpoint_error,
    HTTPException: on_litestar_error,
    Exception: on_unexpected_error,
}


async def add_request_id(message: Message, scope: Scope) -> None:
    """Echo the client's X-Request-ID (if it is reasonable), else make one up."""
    if message["type"] != "http.response.start":
        return
    given = next((v for k, v in scope["headers"] if k == b"x-request-id"), b"")
    request_id = given.decode("latin-1") if 0 < len(given) <= _MAX_REQUEST_ID else None
    MutableScopeHeaders.from_message(message)["X-Request-ID"] = request_id or uuid.uuid4().hex
