"""The run dialect over HTTP: a Litestar app built from openapi/openapi.yaml."""

from .app import build, create_app

__all__ = ["build", "create_app"]
