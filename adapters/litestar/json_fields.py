"""Fields whose JSON the document leaves open: JSON text a form field carries (`tools`,
`edits`, `branches`), and free-form objects inside a JSON body (a tool's arguments). What
the document cannot say of them is checked here, with the field named."""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from . import json_depth
from .errors import HttpError

T = TypeVar("T")


def decoded(value: str | list[Any], field: str, invalid: str | None = None) -> Any:
    """`value` as JSON: text (a form field's) decoded, a 400 saying `invalid` if it is not
    JSON; a JSON array (a JSON body's) as it is."""
    if not isinstance(value, str):
        return value
    json_depth.refuse_deep(value.encode(), field)
    try:
        return msgspec.json.decode(value)
    except msgspec.DecodeError:
        raise HttpError(400, "BAD_REQUEST", invalid or f"{field} is not valid JSON") from None


def holds_nul(value: Any) -> bool:
    """Whether a decoded JSON value holds a U+0000 in any string (a key included): what
    the document's patterns cannot see inside a free-form object, or in JSON text."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(k) or holds_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_nul(v) for v in value)
    return False


def json_field(value: str | list[Any], kind: type[T], field: str) -> T:
    """An array of objects, JSON text or JSON, as `kind`: a shape `kind` refuses is a 400
    naming the field, as is text that is not JSON. Text holding a U+0000 is a 422 (its
    escapes hid it from the document's patterns, which checked a JSON body's strings); a
    tool's arguments, free-form objects, are kept whole, as a model's are. An object's
    fields sent as null are left out, as the document reads them."""
    found = decoded(value, field)
    if isinstance(value, str) and holds_nul(found):
        raise HttpError(422, "VALIDATION_ERROR", f"{field} must not contain U+0000 (NUL)")
    if isinstance(found, list):
        found = [
            {k: v for k, v in e.items() if v is not None} if isinstance(e, dict) else e
            for e in found
        ]
    try:
        return msgspec.convert(found, kind)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at `$")
        named = field + where.rstrip("`")
        if missing := re.fullmatch(r"Object missing required field `(.+)`", message):
            raise HttpError(400, "BAD_REQUEST", f"{named}.{missing[1]} is required") from None
        raise HttpError(400, "BAD_REQUEST", f"{named}: {message}") from None
