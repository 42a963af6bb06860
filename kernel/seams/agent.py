"""Agents and their tools. A tool is a plain Python function; its JSON schema comes from
its signature and its docstring, and the same signature validates the model's arguments."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints, overload

import msgspec

from runpoint.core.types import ExpiryAction
from runpoint.seams.model import Model, ToolSchema
from runpoint.seams.retention import Retention

# What running a tool does to the world, which decides what a resumed run may do with a
# call that was under way when its process died: run a `read` or `idempotent` call again;
# never a `side-effect` call (the default), whose start and end are recorded durably.
Effect = Literal["read", "idempotent", "side-effect"]


@dataclass(frozen=True)
class Tool:
    function: Callable[..., Any]
    schema: ToolSchema
    arguments: type[msgspec.Struct]
    requires_confirmation: bool = False
    effect: Effect = "side-effect"

    @property
    def name(self) -> str:
        return self.schema.name

    async def __call__(self, arguments: dict[str, Any]) -> str:
        """Validate the model's arguments against the signature, run, return text."""
        args = msgspec.convert(arguments, self.arguments, strict=False)
        kwargs = msgspec.structs.asdict(args)
        if inspect.iscoroutinefunction(self.function):
            result = await self.function(**kwargs)
        else:
            result = await asyncio.to_thread(self.function, **kwargs)
        return result if isinstance(result, str) else msgspec.json.encode(result).decode()


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, requires_confirmation: bool = False, effect: Effect = ...
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    requires_confirmation: bool = False,
    effect: Effect = "side-effect",
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a Tool of a function; usable bare (``@tool``) or with options."""

    def wrap(fn: Callable[..., Any]) -> Tool:
        return _make_tool(fn, name or fn.__name__, requires_confirmation, effect)

    return wrap(function) if function is not None else wrap


def _make_tool(
    fn: Callable[..., Any], name: str, requires_confirmation: bool, effect: Effect
) -> Tool:
    hints = get_type_hints(fn)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    for param in inspect.signature(fn).parameters.values():
        hint = hints.get(param.name, Any)
        if param.default is inspect.Parameter.empty:
            fields.append((param.name, hint))
        else:
            fields.append((param.name, hint, param.default))
    arguments = msgspec.defstruct(f"{name}_arguments", fields, forbid_unknown_fields=True)
    (ref,), components = msgspec.json.schema_components([arguments])
    parameters = dict(components.pop(ref["$ref"].rsplit("/", 1)[-1]))
    parameters.pop("title", None)
    if components:
        parameters["$defs"] = components
    summary, param_docs = _parse_docstring(inspect.getdoc(fn) or "")
    for param_name, doc in param_docs.items():
        if param_name in parameters.get("properties", {}):
            parameters["properties"][param_name]["description"] = doc
    schema = ToolSchema(name, summary, parameters)
    return Tool(fn, schema, arguments, requires_confirmation, effect)


_ARG_LINE = re.compile(r"^\s+(\w+)(?:\s*\([^)]*\))?\s*:\s*(.+)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and parameter lines of a Google-style ``Args:`` section."""
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    params: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Arguments:", "Parameters:"):
            in_args = True
        elif in_args and (match := _ARG_LINE.match(line)):
            params[match[1]] = match[2].strip()
        elif in_args and line and not line[0].isspace():
            in_args = False
    return summary, params


@dataclass
class Agent:
    """What a run runs: instructions, a model, tools and a checkpoint policy."""

    id: str
    model: str | Model
    name: str | None = None
    instructions: str | None = None
    tools: list[Callable[..., Any] | Tool] = field(default_factory=list)
    # a policy name: "tool-batch", "runs", or one a plugin registers
    checkpoint: str = "tool-batch"
    # the policy's options, e.g. {"n": 3} for "every-n-turns"; bad ones fail at start-up
    checkpoint_options: dict[str, Any] = field(default_factory=dict)
    # how many earlier runs of the session the model sees; None: all, 0: none
    history_runs: int | None = None
    max_turns: int = 20
    # what of its finished runs is kept how long, over the server's (None: the server's)
    retention: Retention | None = None
    # how long a paused run's approval waits for a person (seconds; None: for ever), and
    # what then: its calls are rejected with the reason (the model reads it), or the run
    # is cancelled (see runpoint.runs.approvals)
    approval_timeout: float | None = None
    approval_expiry: ExpiryAction = "reject"

    tool_map: dict[str, Tool] = field(init=False)

    def __post_init__(self) -> None:
        tools = [t if isinstance(t, Tool) else tool(t) for t in self.tools]
        self.tool_map = {t.name: t for t in tools}
        if len(self.tool_map) != len(tools):
            raise ValueError(f"agent {self.id!r} has two tools of one name")

    @property
    def model_name(self) -> str:
        return self.model if isinstance(self.model, str) else self.model.name
