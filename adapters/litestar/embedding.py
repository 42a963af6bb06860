"""runpoint inside another ASGI app: mounted under a prefix, or behind a proxy that keeps or
strips one (docs/http.md, "Prefixes").

A host framework seldom passes its lifespan on to an app it mounts (Starlette's and
FastAPI's `Mount`, Litestar's `@asgi` mounts, Django), so the app starts itself at its first
request; a host that composes lifespans runs `app.serving` in its own (FastAPI's
`lifespan=`). Either way runpoint opens (migrations, lease watch, run queue, sweeper) once
and closes once."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import unquote

from litestar import Litestar
from litestar.enums import ScopeType
from litestar.types import Scope

from runpoint.facade import Runpoint


class Lifecycle:
    """Opens `rp` once and closes it once, whoever asks first: the app's own lifespan, a
    host's (`serving`), or the first request."""

    def __init__(self, rp: Runpoint) -> None:
        self.rp = rp
        self.started = False
        self._lock = asyncio.Lock()
        self._generation = 0
        self._closer: AsyncIterator[None] | None = None

    async def start(self) -> None:
        async with self._lock:
            if not self.started:
                await self.rp.open()
                self.started = True

    async def stop(self) -> None:
        async with self._lock:
            if self.started:
                self.started = False
                self._generation += 1
                self._closer = None
                await self.rp.close()

    async def start_unasked(self) -> None:
        """Start for a request that came before any lifespan did. Nothing will say when
        to stop, so the event loop's end does: an async generator left open is closed
        (its `finally` run, the loop still going) when `asyncio.run` ends."""
        await self.start()
        if self._closer is None:
            self._closer = self._close_at_exit(self._generation)
            await anext(self._closer)

    async def _close_at_exit(self, generation: int) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if generation == self._generation:  # not a later start's to close
                await self.stop()


class RunpointApp(Litestar):
    """The Litestar app `create_app` and `build` make: what it adds to Litestar is being
    embeddable. `runpoint` is the facade it serves (a host may call it too)."""

    def __init__(self, rp: Runpoint, *, root_path: str = "", **config: Any) -> None:
        self.runpoint = rp
        self.lifecycle = Lifecycle(rp)
        self.root_path = root_path.rstrip("/")
        super().__init__(
            on_startup=[self.lifecycle.start], on_shutdown=[self.lifecycle.stop], **config
        )

    # typed as ASGI's callable is (Starlette's, httpx's): a host's `mount` takes it as is
    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == ScopeType.HTTP and not await self._ready(scope, send):
            return
        await super().__call__(scope, receive, send)

    async def _ready(self, scope: Scope, send: Any) -> bool:
        """Whether the request goes on to the routes: with the prefix where ASGI says it,
        runpoint started (a 503 if it cannot), not for the console's page without its
        slash (its files are relative to {prefix}/ui/)."""
        if self.root_path and not scope.get("root_path"):
            prefixed(scope, self.root_path)
        if route_path(scope) == "/ui":
            await redirect(send, scope.get("root_path", "") + "/ui/", scope)
            return False
        if not self.lifecycle.started:
            try:
                await self.lifecycle.start_unasked()
            except Exception as exc:  # the database's state, not the request's
                await unavailable(send, exc)
                return False
        return True

    @contextlib.asynccontextmanager
    async def serving(self, host: object = None) -> AsyncIterator[None]:
        """runpoint open for as long as the block lasts: a host's lifespan (FastAPI's
        `lifespan=app.serving`, or `async with app.serving():` inside the host's own)."""
        await self.lifecycle.start()
        try:
            yield
        finally:
            await self.lifecycle.stop()


def mount(host: Any, prefix: str, app: RunpointApp) -> Any:
    """`host`, an ASGI app that cannot mount another itself (Django's), with `app` at
    `prefix`: a request there goes to `app` with the prefix in `root_path` (as a mount
    puts it), any other to `host`; the lifespan goes to `app` alone (Django has none)."""
    prefix = prefix.rstrip("/")

    async def mounted(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await app(scope, receive, send)
            return
        if _under(route_path(scope), prefix):
            scope = {**scope, "root_path": scope.get("root_path", "") + prefix}
            await app(scope, receive, send)
        else:
            await host(scope, receive, send)

    return mounted


def prefixed(scope: Scope, prefix: str) -> None:
    """Put `prefix` (the app's `root_path`) where ASGI says a prefix is: in `root_path`,
    and at the start of `path`, which a proxy that strips it, or a host's mount that does
    (Litestar's, which keeps it in `raw_path`), left out."""
    path: str = scope["path"]
    raw: bytes = scope.get("raw_path") or b""
    if not _under(path, prefix):
        if _under(raw.decode("latin-1"), prefix):
            scope["path"] = unquote(raw.decode("latin-1"))
        else:
            scope["path"] = prefix + path
            scope["raw_path"] = prefix.encode() + (raw or path.encode())
    scope["root_path"] = prefix


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + "/")


def route_path(scope: Scope) -> str:
    """The request's path inside the app, without the prefix it was served under."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


async def redirect(send: Any, location: str, scope: Scope) -> None:
    if query := scope.get("query_string", b""):
        location += "?" + query.decode("latin-1")
    headers = [(b"location", location.encode("latin-1")), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 308, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


async def unavailable(send: Any, exc: Exception) -> None:
    reason = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    body = json.dumps(
        {"detail": f"runpoint could not start: {reason}", "error_code": "DATABASE_UNAVAILABLE"}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"retry-after", b"5")]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})
