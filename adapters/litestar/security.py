"""Who may call an operation, and how often: the middleware every route of the document
goes through, whichever dialect it belongs to. Refusals are raised as Litestar's exceptions,
so each dialect's exception handlers (errors.py) render them in its own format."""

from __future__ import annotations

import inspect
import math
import re
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any, get_args

from litestar import Request
from litestar.config.cors import CORSConfig
from litestar.datastructures import Headers
from litestar.enums import ScopeType
from litestar.exceptions import (
    NotAuthorizedException,
    PermissionDeniedException,
    TooManyRequestsException,
)
from litestar.middleware import ASGIMiddleware
from litestar.middleware.rate_limit import DURATION_VALUES, DurationUnit, RateLimitConfig
from litestar.types import ASGIApp, Receive, Scope, Send

from runpoint.adapters.auth import Auth, Unauthenticated
from runpoint.core import tenancy

# how an embedding app says who a request acts as (see Authenticate)
HostPrincipal = Callable[[Scope], tenancy.Principal | Awaitable[tenancy.Principal | None] | None]
# a route's opt key: anyone may call it (the document's `security: []`, and the console)
PUBLIC = "public"
_READING = frozenset({"GET", "HEAD"})
_ORIGIN = re.compile(r"[a-z][a-z0-9+.-]*://[^/\s]+", re.IGNORECASE)
_RATE = re.compile(r"(\d+)/(" + "|".join(get_args(DurationUnit)) + ")")


class FailureBudget:
    """At most `count` failed authentications per client address in each window of
    `seconds` (fixed windows, as Litestar's limiter keeps). Past it, the address's every
    request for a secured route is a 429 until the window ends, refused before its
    credentials are looked at: guessing keys or flooding JWT verification costs the
    guesser its time, not the server its CPU."""

    def __init__(self, count: int, seconds: int) -> None:
        self.count = count
        self.seconds = seconds
        self._window = -1
        self._failures: Counter[str] = Counter()

    @classmethod
    def of(cls, limit: RateLimitConfig) -> FailureBudget:
        """As many failures per address as `limit` allows requests per principal."""
        unit, count = limit.rate_limit
        return cls(count, DURATION_VALUES[unit])

    def check(self, address: str) -> None:
        """A 429 with Retry-After if `address` has spent its budget in this window."""
        now = self._now()
        if self._failures[address] >= self.count:
            retry_after = math.ceil(self.seconds - now % self.seconds)
            raise TooManyRequestsException(
                "too many failed authentications from this address",
                headers={"Retry-After": str(retry_after)},
            )

    def spend(self, address: str) -> None:
        self._now()
        self._failures[address] += 1

    def _now(self) -> float:
        """The time, once the failures of past windows are forgotten (so the memory held
        is one window's failing addresses at most)."""
        now = time.monotonic()
        if (window := int(now // self.seconds)) != self._window:
            self._window, self._failures = window, Counter()
        return now


class Authenticate(ASGIMiddleware):
    """Acts as the principal the bearer token proves (401 without one), if it has the
    scope the method needs (403): `read` for GET, `write` for anything else. With
    `failures`, each client address has a budget of 401s (see FailureBudget).

    An app that embeds runpoint and signs its users in itself gives `host`: it reads the
    request's ASGI scope (where the host's own middleware put its user) and says which
    principal it acts as. None means nobody the host knows: then the bearer token, if
    runpoint has credentials of its own, or a 401."""

    scopes = (ScopeType.HTTP,)
    exclude_opt_key = PUBLIC

    @staticmethod
    def should_bypass_for_scope(scope: Scope) -> bool:
        # Litestar answers OPTIONS itself (Allow, CORS preflights carry no credentials)
        return scope.get("method") == "OPTIONS"

    def __init__(
        self,
        auth: Auth,
        failures: FailureBudget | None = None,
        host: HostPrincipal | None = None,
    ) -> None:
        self.auth = auth
        self.failures = failures
        self.host = host

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        principal = await self._host_principal(scope) if self.host else None
        if principal is None:
            principal = tenancy.OPEN if self.auth.is_open else self._principal(scope)
        needed = tenancy.READ if scope.get("method") in _READING else tenancy.WRITE
        if needed not in principal.scopes:
            raise PermissionDeniedException(f"this token lacks the {needed!r} scope")
        scope["user"] = principal
        with tenancy.acting_as(principal):
            await next_app(scope, receive, send)

    async def _host_principal(self, scope: Scope) -> tenancy.Principal | None:
        assert self.host is not None
        given = self.host(scope)
        principal = await given if inspect.isawaitable(given) else given
        if principal is None and self.auth.is_open:
            raise NotAuthorizedException("sign in: the app runpoint is part of knows no user here")
        if principal is not None and not isinstance(principal, tenancy.Principal):
            raise TypeError(f"a host's principal hook gave {principal!r}, not a Principal")
        return principal

    def _principal(self, scope: Scope) -> tenancy.Principal:
        # the address as the server saw it (uvicorn takes X-Forwarded-For only from the
        # proxies $FORWARDED_ALLOW_IPS trusts); none over a Unix socket
        client = scope.get("client")
        address = client[0] if client else ""
        if self.failures:
            self.failures.check(address)
        scheme, _, token = Headers.from_scope(scope).get("authorization", "").partition(" ")
        try:
            if scheme and scheme.lower() != "bearer":
                raise Unauthenticated(f"use the Bearer scheme, not {scheme}")
            return self.auth.principal(token.strip())
        except Unauthenticated as exc:
            if self.failures:
                self.failures.spend(address)
            raise NotAuthorizedException(str(exc), headers={"WWW-Authenticate": "Bearer"}) from None


def rate_limit(spec: str) -> RateLimitConfig:
    """Litestar's limiter for `spec` ("600/minute"), one budget per principal."""
    if not (match := _RATE.fullmatch(spec.strip())) or int(match[1]) < 1:
        units = ", ".join(get_args(DurationUnit))
        raise ValueError(f"a rate limit is COUNT/UNIT with UNIT one of {units}, not {spec!r}")
    unit: DurationUnit = match[2]  # type: ignore[assignment]
    return RateLimitConfig(
        (unit, int(match[1])),
        identifier_for_request=_principal_key,
        check_throttle_handler=_acts_as_principal,
    )


def _acts_as_principal(request: Request[Any, Any, Any]) -> bool:
    """Whether Authenticate let the request through (public routes have no budget)."""
    return isinstance(request.scope.get("user"), tenancy.Principal)


def _principal_key(request: Request[Any, Any, Any]) -> str:
    principal: tenancy.Principal = request.scope["user"]
    return f"{principal.team}\n{principal.user or ''}"


def cors(origins: str) -> CORSConfig | None:
    """Litestar's CORS for `origins` ("https://ui.example,http://localhost:3000", or "*"):
    browsers there may send the headers runpoint reads and read the ones it sets; with
    credentials only for origins named (a browser refuses them with "*"). Litestar answers
    every preflight itself, before authentication, and one from another origin with a 400
    without CORS headers."""
    named = [origin.strip() for origin in origins.split(",") if origin.strip()]
    if not named:
        return None
    if bad := [o for o in named if o != "*" and not _ORIGIN.fullmatch(o)]:
        raise ValueError(f"a CORS origin is SCHEME://HOST[:PORT] (no path) or *, not {bad[0]!r}")
    any_origin = "*" in named
    return CORSConfig(
        allow_origins=["*"] if any_origin else named,
        allow_headers=["Authorization", "Idempotency-Key", "Last-Event-ID", "Content-Type"],
        expose_headers=["X-Request-ID", "Retry-After", "Location"],
        allow_credentials=not any_origin,
    )
