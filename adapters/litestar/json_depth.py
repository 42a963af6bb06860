"""How deep JSON text a client sent nests, measured before it is decoded: the decoder
recurses once per level, so ~1,000 levels (a 2 KB body) would exhaust Python's stack.

The deepest legitimate request is a continue's tool decisions in Agno's ToolExecution shape
(body, `tools`, a decision, its `tool_args`, then the model's own arguments): a handful of
levels. MAX_DEPTH leaves ample room above that and stays far below the recursion limit."""

from __future__ import annotations

import re

from .errors import HttpError

MAX_DEPTH = 64
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)  # brackets in one do not nest
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_OPENING = frozenset(b"[{")


def refuse_deep(text: bytes, what: str) -> None:
    """A 422 naming `what` if `text` nests arrays and objects deeper than MAX_DEPTH."""
    if text.count(b"[") + text.count(b"{") <= MAX_DEPTH:
        return  # too few brackets to nest that deep: most bodies stop here
    depth = 0
    for bracket in _STRING.sub(b"", text).translate(None, _NOT_BRACKET):
        depth += 1 if bracket in _OPENING else -1
        if depth > MAX_DEPTH:
            raise HttpError(
                422,
                "VALIDATION_ERROR",
                f"{what} nests arrays and objects deeper than {MAX_DEPTH} levels",
            )
