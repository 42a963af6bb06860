"""The run dialect over HTTP: a Litestar app built from openapi/openapi.yaml, which any ASGI
app may mount (see embedding.py)."""

from .app import build, create_app
from .embedding import RunpointApp, mount
from .security import HostPrincipal

__all__ = ["HostPrincipal", "RunpointApp", "build", "create_app", "mount"]
