"""Read openapi.yaml into the operations the app serves, each with a msgspec type that
validates its inputs (path and query parameters and body fields, in one namespace).

Only the JSON Schema the request side of the document uses is understood; anything else
fails at start-up rather than validating loosely.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Union

import msgspec
import yaml

METHODS = ("get", "put", "post", "delete", "patch")
JSON = "application/json"
URLENCODED = "application/x-www-form-urlencoded"
FORMS = (URLENCODED, "multipart/form-data")
# A request body's extension: more media types accepted with its one schema, kept out of
# its `content` (the run dialect's forms, for AgentOS's clients): a generator that meets
# several media types of one schema makes a client that sends them all at once.
ALSO_ACCEPTS = "x-also-accepts"
_TEXT_CONSTRAINTS = {"pattern": "pattern", "minLength": "min_length", "maxLength": "max_length"}
_NUMBER_CONSTRAINTS = {"minimum": "ge", "maximum": "le"}
_ARRAY_CONSTRAINTS = {"minItems": "min_length", "maxItems": "max_length"}
_KNOWN_KEYS = {"type", "anyOf", "const", "enum", "items", "properties", "required", "default"}
_NOTES = {"description", "title", "example", "examples"}


class SpecError(Exception):
    """The document and the handlers disagree, or the document uses unsupported schema."""


@dataclass(frozen=True)
class Field:
    # the handler's argument: a header's is its name in snake case (idempotency_key)
    name: str
    location: Literal["path", "query", "header", "body"]
    required: bool
    # the JSON types the schema admits: how to read the field from text (form, query, path)
    json_types: frozenset[str]
    wire_name: str  # as the request carries it


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    path: str
    fields: tuple[Field, ...]
    inputs: type[msgspec.Struct]  # validates every field at once
    body_types: tuple[str, ...]  # accepted media types; empty: no body
    body_required: bool  # an empty body is refused (the document's requestBody.required)
    status: int  # the success status
    public: bool  # callable without credentials (its `security` is empty)


@cache
def document() -> dict[str, Any]:
    """The checked-in openapi.yaml (shipped in the package as a link to openapi/)."""
    source = resources.files(__package__).joinpath("openapi.yaml")
    text = source.read_bytes()
    digest = hashlib.blake2b(text, digest_size=16).hexdigest()
    # parsed once per text, then read back as JSON (36 ms of a server's start against 1):
    # kept beside the bytecode, and like it left unwritten where that is not written
    cached = Path(str(source)).parent / "__pycache__" / "openapi.json"
    with contextlib.suppress(OSError, msgspec.DecodeError):
        kept = msgspec.json.decode(cached.read_bytes(), type=_Kept)
        if kept.digest == digest:
            return kept.document
    # libyaml's loader when PyYAML has it (its wheels do): a tenth of the pure-Python one's
    loaded: dict[str, Any] = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    if not sys.dont_write_bytecode:
        with contextlib.suppress(OSError):
            cached.parent.mkdir(exist_ok=True)
            partial = cached.with_suffix(f".{os.getpid()}")
            partial.write_bytes(msgspec.json.encode(_Kept(digest, loaded)))
            partial.replace(cached)  # whole or not at all, for a server starting beside
    return loaded


class _Kept(msgspec.Struct):
    digest: str  # of the YAML text it was parsed from
    document: dict[str, Any]


def operations(doc: dict[str, Any]) -> list[Operation]:
    resolver = _Resolver(doc)
    found = []
    for path, item in doc["paths"].items():
        for method in METHODS:
            if (op := item.get(method)) is not None:
                found.append(resolver.operation(path, method, op))
    return found


class _Resolver:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc

    def deref(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target: Any = self.doc
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            # siblings of a $ref (a description) only annotate it
            node = target
        return node

    def operation(self, path: str, method: str, op: dict[str, Any]) -> Operation:
        name = op["operationId"]
        # (name, location, required, schema) of every input
        inputs = [
            (p["name"], p["in"], p.get("required", False), p["schema"])
            for p in map(self.deref, op.get("parameters", []))
        ]
        names = {wire: wire.lower().replace("-", "_") for wire, *_ in inputs}
        body_types: tuple[str, ...] = ()
        body_required = False
        if body := op.get("requestBody"):
            body = self.deref(body)
            body_required = body.get("required", False)
            content = body["content"]
            # the media types the document lists, then those it only mentions
            body_types = (*content, *body.get(ALSO_ACCEPTS, ()))
            schema = self.deref(next(iter(content.values()))["schema"])
            required = set(schema.get("required", ()))
            inputs += [(k, "body", k in required, s) for k, s in schema["properties"].items()]
            names |= {k: k for k in schema["properties"]}
        if len({i[0] for i in inputs}) != len(inputs):
            raise SpecError(f"{name}: two inputs share a name")
        struct = msgspec.defstruct(
            f"{name}_inputs",
            [
                (names[key], self.type(schema, key))
                if required
                else (names[key], self.type(schema, key), self.default(schema))
                for key, _, required, schema in sorted(inputs, key=lambda i: not i[2])
            ],
        )
        fields = tuple(
            Field(names[k], loc, req, self.json_types(s), k) for k, loc, req, s in inputs
        )
        status = min(int(code) for code in op["responses"] if code.startswith("2"))
        public = not op.get("security", self.doc.get("security"))
        return Operation(
            name, method.upper(), path, fields, struct, body_types, body_required, status, public
        )

    def default(self, schema: dict[str, Any]) -> Any:
        return schema.get("default", self.deref(schema).get("default"))

    def json_types(self, schema: dict[str, Any]) -> frozenset[str]:
        schema = self.deref(schema)
        if "anyOf" in schema:
            return frozenset().union(*(self.json_types(s) for s in schema["anyOf"]))
        kind = schema.get("type", ())
        return frozenset([kind] if isinstance(kind, str) else kind)

    def type(self, schema: dict[str, Any], where: str) -> Any:
        schema = self.deref(schema)
        unknown = set(schema) - _KNOWN_KEYS - _NOTES - set(_TEXT_CONSTRAINTS)
        unknown -= set(_NUMBER_CONSTRAINTS) | set(_ARRAY_CONSTRAINTS)
        if unknown:
            raise SpecError(f"{where}: unsupported schema keywords {sorted(unknown)}")
        if "anyOf" in schema:
            return Union[tuple(self.type(s, where) for s in schema["anyOf"])]  # noqa: UP007
        if "const" in schema:
            return Literal[schema["const"]]
        if "enum" in schema:
            return Literal[tuple(schema["enum"])]
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        return Union[tuple(self.scalar(k, schema, where) for k in kinds)]  # noqa: UP007

    def scalar(self, kind: str, schema: dict[str, Any], where: str) -> Any:
        if kind == "string":
            return _constrained(str, schema, _TEXT_CONSTRAINTS)
        if kind == "integer":
            return _constrained(int, schema, _NUMBER_CONSTRAINTS)
        if kind == "boolean":
            return bool
        if kind == "null":
            return None
        if kind == "array":
            item = self.type(schema["items"], where)
            return _constrained(list[item], schema, _ARRAY_CONSTRAINTS)  # type: ignore[valid-type]
        if kind == "object" and "properties" in schema:
            required = set(schema.get("required", ()))
            props = schema["properties"].items()
            fields = [
                (k, self.type(s, f"{where}.{k}"))
                if k in required
                else (k, self.type(s, f"{where}.{k}"), None)
                for k, s in sorted(props, key=lambda kv: kv[0] not in required)
            ]
            return msgspec.defstruct(f"{where}_item", fields)
        if kind == "object":  # free-form (a tool's arguments): its own code checks it
            return dict[str, Any]
        raise SpecError(f"{where}: unsupported type {kind!r}")


def _constrained(kind: Any, schema: dict[str, Any], names: dict[str, str]) -> Any:
    meta = {names[k]: v for k, v in schema.items() if k in names}
    return Annotated[kind, msgspec.Meta(**meta)] if meta else kind
