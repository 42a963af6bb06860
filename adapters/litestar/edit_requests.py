"""A continue's `edits` (RunEdit in openapi.yaml: a JSON array, or its JSON text in a form
field) as the kernel's edit requests; anything else is a 422 naming the field."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from runpoint.edits import EditRequest

from . import json_depth
from .errors import HttpError
from .inputs import holds_nul


def edit_requests(edits: str | list[Any] | None) -> list[EditRequest]:
    if edits is None or edits == "":
        return []
    if isinstance(edits, str):
        json_depth.refuse_deep(edits.encode(), "edits")
        try:
            edits = msgspec.json.decode(edits)
        except msgspec.DecodeError:
            raise HttpError(422, "VALIDATION_ERROR", "edits is not valid JSON") from None
    if holds_nul(edits):
        raise HttpError(422, "VALIDATION_ERROR", "edits must not contain U+0000 (NUL)")
    if isinstance(edits, list):  # a field left out and a field sent as null are one
        edits = [
            {k: v for k, v in e.items() if v is not None} if isinstance(e, dict) else e
            for e in edits
        ]
    try:
        return msgspec.convert(edits, list[EditRequest])
    except msgspec.ValidationError as exc:
        raise HttpError(422, "VALIDATION_ERROR", _named(exc)) from None


def _named(exc: msgspec.ValidationError) -> str:
    """msgspec's complaint with its field first: `edits[0].content is required`."""
    message, _, where = str(exc).partition(" - at `$")
    field = "edits" + where.rstrip("`")
    if missing := re.fullmatch(r"Object missing required field `(.+)`", message):
        return f"{field}.{missing[1]} is required"
    return f"{field}: {message}"
