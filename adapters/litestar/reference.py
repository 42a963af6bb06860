"""The document as the server serves it, and the interactive reference of it at /docs.

A server without credentials configured serves the document without its bearer-token
requirement (nothing asks for one). /docs is Swagger UI, whose files come from the
swagger-ui-bundle-v2 package and are served from here, so a page load fetches nothing from
the internet; `/` leads to the console. None of these is an operation of the document: they
are its clients, public like the console.
"""

from __future__ import annotations

import json
from typing import Any

from litestar import MediaType, Request, Response, get
from litestar.exceptions import NotFoundException
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.params import FromPath
from litestar.response import File, Redirect
from swagger_ui_bundle import swagger_ui_path

from runpoint.facade import Runpoint

from .handlers import Reply, operation
from .security import PUBLIC
from .spec import JSON

ASSETS = "/docs/assets"
PREFIXES_KEPT = 8
# what the page loads (the package has more: maps, an index for its own demo, ...)
_FILES = {
    "swagger-ui-bundle.js": "text/javascript",
    "swagger-ui-standalone-preset.js": "text/javascript",
    "swagger-ui.css": "text/css",
}


class Served:
    """The served document as JSON, for each prefix it is asked under: its `servers` say
    the prefix, so clients generated from it call the paths the app answers."""

    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self._json: dict[str, bytes] = {}

    def __call__(self, request: Request[Any, Any, Any]) -> bytes:
        root = request.scope.get("root_path", "")
        if (found := self._json.get(root)) is None:
            doc = self.doc | {"servers": [{"url": root}]} if root else self.doc
            found = json.dumps(doc).encode()
            if len(self._json) < PREFIXES_KEPT:  # the prefix is the server's, but bounded
                self._json[root] = found
        return found


def served(doc: dict[str, Any], *, open_: bool) -> dict[str, Any]:
    """`doc` as a server serves it: an open one's asks for no credentials."""
    if not open_:
        return doc
    components = {k: v for k, v in doc.get("components", {}).items() if k != "securitySchemes"}
    return {k: v for k, v in doc.items() if k != "security"} | {"components": components}


@operation
async def get_openapi(rp: Runpoint, *, openapi_json: bytes) -> Reply:
    """The served document, as JSON (the app gives it, see `served`)."""
    return Response(openapi_json, media_type=JSON)


def routes(document: Served) -> list[HTTPRouteHandler]:
    """/docs, its files, and `/`, each under the prefix the request came by."""

    @get("/docs", media_type=MediaType.HTML, opt={PUBLIC: True}, sync_to_thread=False)
    def docs(request: Request[Any, Any, Any]) -> bytes:
        assets = request.scope.get("root_path", "") + ASSETS
        swagger = SwaggerRenderPlugin(
            js_url=f"{assets}/swagger-ui-bundle.js",
            css_url=f"{assets}/swagger-ui.css",
            standalone_preset_js_url=f"{assets}/swagger-ui-standalone-preset.js",
            favicon="",  # Litestar's default is an image on a CDN
        )
        return swagger.render(request, json.loads(document(request)))

    @get(f"{ASSETS}/{{name:str}}", opt={PUBLIC: True}, sync_to_thread=False)
    def asset(name: FromPath[str]) -> File:
        if name not in _FILES:
            raise NotFoundException()
        return File(
            swagger_ui_path / name, content_disposition_type="inline", media_type=_FILES[name]
        )

    @get("/", opt={PUBLIC: True}, sync_to_thread=False)
    def home(request: Request[Any, Any, Any]) -> Redirect:
        return Redirect(request.scope.get("root_path", "") + "/ui/")

    return [docs, asset, home]
