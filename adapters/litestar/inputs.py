"""Read an operation's inputs off a request (path, query, and a form or JSON body) and
validate them against the type the document gives them, before any work starts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, cast
from urllib.parse import parse_qsl

import msgspec
from litestar import Request

from runpoint.reads.continue_points import ContinueFrom

from . import json_depth
from .errors import HttpError
from .spec import FORMS, JSON, URLENCODED, Field, Operation

# ASCII digits only: \d and int() also read " 3 ", "+3", "0_3" and other scripts' digits
_INTEGER = re.compile(r"-?[0-9]+")
_BOOLEANS = {"true": True, "false": False}  # in any case (Python's str(False) is "False")
_STEP = re.compile(r"\.?(\w+)|\[(\d+)\]")  # of a path in msgspec's errors: tools[0].result


async def read(
    request: Request[Any, Any, Any], op: Operation
) -> tuple[dict[str, Any], frozenset[str]]:
    """The operation's inputs, absent ones at their defaults; and the names of those the
    request carried."""
    body, body_is_text = await _body(request, op) if op.body_types else ({}, False)
    sources: dict[str, tuple[Mapping[str, Any], bool]] = {"body": (body, body_is_text)}
    raw = {}
    for field in op.fields:
        if field.location not in sources:  # only those the operation reads: each costs
            sources[field.location] = (_text_source(request, field.location), True)
        source, is_text = sources[field.location]
        if field.wire_name in source:
            value = source[field.wire_name]
            raw[field.name] = _from_text(value, field) if is_text else _from_json(value, field)
    try:
        inputs = msgspec.convert(raw, op.inputs)
    except msgspec.ValidationError as exc:
        raise HttpError(422, "VALIDATION_ERROR", _readable(exc, raw)) from None
    result: dict[str, Any] = msgspec.to_builtins(inputs)  # nested objects as dicts too
    return result, frozenset(raw)


def _text_source(request: Request[Any, Any, Any], location: str) -> Mapping[str, str]:
    """The path's, the query's or the headers' values, by name."""
    if location == "path":
        return request.path_params
    if location == "query":
        return _url_decoded(request.scope["query_string"], "the query string")
    return request.headers


def _from_text(value: str, field: Field) -> Any:
    """Text (a form field, a query or path parameter) as the JSON type its schema wants."""
    if "string" in field.json_types:
        return value
    if "integer" in field.json_types and (number := integer(value)) is not None:
        return number
    if "boolean" in field.json_types and value.lower() in _BOOLEANS:
        return _BOOLEANS[value.lower()]
    return value  # left for validation to refuse


def integer(text: str) -> int | None:
    """`text` as an integer if it is one as the document writes it (ASCII digits, an
    optional minus, fewer than int() refuses to read), else None."""
    if not _INTEGER.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:  # more digits than Python reads (sys.get_int_max_str_digits)
        return None


def continue_from(value: str | int) -> ContinueFrom:
    """`continue_from` as the services take it: "end", "last_user" or a message index,
    which a form sends as text."""
    if isinstance(value, int):
        return value
    if value in ("end", "last_user"):
        return cast(ContinueFrom, value)
    if (index := integer(value)) is None:
        raise HttpError(
            400,
            "INVALID_BOUNDARY",
            f"continue_from must be 'end', 'last_user' or a message index, not {value!r}",
        )
    return index


def _from_json(value: Any, field: Field) -> Any:
    """A JSON value as its schema reads it: to JSON Schema, 1.0 is an integer too."""
    if "integer" in field.json_types and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


async def _body(request: Request[Any, Any, Any], op: Operation) -> tuple[Mapping[str, Any], bool]:
    """The body's fields, and whether they are text (form fields) rather than JSON values."""
    media_type = request.content_type[0]
    if media_type == JSON and JSON in op.body_types:
        body = await request.body()
        json_depth.refuse_deep(body, "the body")
        try:
            data = msgspec.json.decode(body)
        except msgspec.DecodeError:
            raise HttpError(422, "VALIDATION_ERROR", "the body is not valid JSON") from None
        if not isinstance(data, dict):
            raise HttpError(422, "VALIDATION_ERROR", "the body must be a JSON object")
        return data, False
    if media_type in FORMS and media_type in op.body_types:
        return await _form_fields(request, media_type), True
    if not await request.body():
        if op.body_required:
            raise HttpError(422, "VALIDATION_ERROR", "the body is required")
        return {}, True
    raise HttpError(
        415,
        "UNSUPPORTED_MEDIA_TYPE",
        f"send the body as one of {', '.join(op.body_types)}, not {media_type or 'untyped'}",
    )


async def _form_fields(request: Request[Any, Any, Any], media_type: str) -> dict[str, str]:
    """A form's text fields (a multipart form's files are no input of ours)."""
    if media_type == URLENCODED:
        return _url_decoded(await request.body(), "the body")
    try:
        form = await request.form()
    except (UnicodeDecodeError, LookupError):  # LookupError: a part names an unknown charset
        raise HttpError(
            422, "VALIDATION_ERROR", "the body is not valid UTF-8 (or the charset its part names)"
        ) from None
    return {k: v for k, v in form.multi_items() if isinstance(v, str)}


def _url_decoded(encoded: bytes, what: str) -> dict[str, str]:
    """The fields of a query string or a urlencoded form, the last of a repeated name. Text
    that is not UTF-8 is refused, as in JSON: Litestar would read it as Latin-1 or replace
    it with U+FFFD, and so store something other than what the client sent."""
    try:
        return dict(parse_qsl(encoded.decode(), keep_blank_values=True, errors="strict"))
    except UnicodeDecodeError:
        raise HttpError(422, "VALIDATION_ERROR", f"{what} is not valid UTF-8") from None


def _readable(exc: msgspec.ValidationError, raw: Mapping[str, Any]) -> str:
    """msgspec's message with the field named first: `message_index: Expected int...`."""
    message, _, where = str(exc).partition(" - at `$.")
    where = where.rstrip("`")
    value = _at(raw, where)
    if value == "":
        return f"{where} must not be empty"
    if "matching regex" in message and isinstance(value, str):
        if "\x00" in value:
            return f"{where} must not contain U+0000 (NUL)"
        if not value.strip():
            return f"{where} must not be blank"
    if missing := re.fullmatch(r"Object missing required field `(.+)`", message):
        name = f"{where}.{missing[1]}" if where else missing[1]
        return f"{name} is required"
    return f"{where}: {message}" if where else message


def _at(raw: Mapping[str, Any], where: str) -> Any:
    """The value at `where` in the inputs, or None."""
    value: Any = raw
    for name, index in _STEP.findall(where):
        try:
            value = value[int(index)] if index else value[name]
        except (LookupError, TypeError):
            return None
    return value
