"""Host apps runpoint is mounted in at PREFIX, each as its framework's documentation says to
mount an ASGI app, beside a route of the host's own (/hello); `composed` hands runpoint's
lifespan to the host's (else runpoint starts at its first request)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from fastapi import FastAPI
from litestar import Litestar, asgi, get
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from runpoint.adapters.litestar import RunpointApp, create_app, mount
from runpoint.plugins.demo import agents

PREFIX = "/rp"
HELLO = "hello from the host"
Host = Callable[[RunpointApp, bool], Any]


def runpoint_app(database: str, **options: Any) -> tuple[RunpointApp, Counter[str]]:
    """runpoint's app, and how often it opened and closed."""
    app = create_app(agents, database=database, **options)
    counts: Counter[str] = Counter()
    rp = app.runpoint
    opening, closing = rp.open, rp.close

    async def open_() -> Any:
        counts["open"] += 1
        return await opening()

    async def close() -> None:
        counts["close"] += 1
        await closing()

    rp.open, rp.close = open_, close  # type: ignore[method-assign]
    return app, counts


def fastapi_host(rp: RunpointApp, composed: bool) -> FastAPI:
    host = FastAPI(lifespan=rp.serving if composed else None)

    @host.get("/hello")
    def hello() -> str:
        return HELLO

    host.mount(PREFIX, rp)
    return host


def starlette_host(rp: RunpointApp, composed: bool) -> Starlette:
    def hello(request: Request) -> PlainTextResponse:
        return PlainTextResponse(HELLO)

    routes = [Route("/hello", hello), Mount(PREFIX, app=rp)]
    return Starlette(routes=routes, lifespan=rp.serving if composed else None)


def litestar_host(rp: RunpointApp, composed: bool) -> Litestar:
    """Litestar strips a mount's prefix from the path it passes on: runpoint is told it
    (`root_path=PREFIX`, see `litestar_runpoint`)."""

    @get("/hello", sync_to_thread=False)
    def hello() -> str:
        return HELLO

    @asgi(PREFIX, is_mount=True, copy_scope=True)
    async def runpoint(scope: Any, receive: Any, send: Any) -> None:
        await rp(scope, receive, send)

    return Litestar([hello, runpoint], lifespan=[rp.serving] if composed else [])


def django_host(rp: RunpointApp, composed: bool) -> Any:
    """Django's ASGI app mounts nothing, and has no lifespan: `mount` puts runpoint beside
    it and gives runpoint the lifespan (so `composed` changes nothing)."""
    import django
    from django.conf import settings
    from django.core.asgi import get_asgi_application

    if not settings.configured:
        settings.configure(
            ROOT_URLCONF=__name__,
            ALLOWED_HOSTS=["*"],
            SECRET_KEY="test-only",
            MIDDLEWARE=[],
            INSTALLED_APPS=[],
            DATABASES={},
        )
        django.setup()
    return mount(get_asgi_application(), PREFIX, rp)


def hello_view(request: HttpRequest) -> HttpResponse:
    return HttpResponse(HELLO, content_type="text/plain")


def _urls() -> list[Any]:
    from django.urls import path

    return [path("hello", hello_view)]


urlpatterns = _urls()

HOSTS: dict[str, Host] = {
    "fastapi": fastapi_host,
    "starlette": starlette_host,
    "litestar": litestar_host,
    "django": django_host,
}


def mounted(kind: str, database: str, composed: bool) -> tuple[Any, RunpointApp, Counter[str]]:
    """A host of `kind` with runpoint at PREFIX."""
    options = {"root_path": PREFIX} if kind == "litestar" else {}
    rp, counts = runpoint_app(database, **options)
    return HOSTS[kind](rp, composed), rp, counts


def served() -> Any:
    """A FastAPI host for uvicorn (`--factory`), on $RUNPOINT_DB: the browser's."""
    rp, _ = runpoint_app(os.environ["RUNPOINT_DB"])
    return fastapi_host(rp, composed=True)
