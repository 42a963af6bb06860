"""How deep JSON text a client sent nests, measured before it is decoded: the decoder
recurses once per level, so ~1,000 levels (a 2 KB body) would exhaust Python's stack.

The deepest legitimate request is a continue's tool decisions in Agno's ToolExecution shape
(body, `tools`, a decision, its `tool_args`, then the model's own arguments): a handful of
levels. MAX_DEPTH leaves ample room above that and stays far below the recursion limit."""

from __future__ import annotations

from .errors import HttpError

MAX_DEPTH = 64
_NOT_SYNTAX = bytes(sorted(set(range(256)) - set(b'[]{}"')))
_OPENING = frozenset(b"[{")


def refuse_deep(text: bytes, what: str) -> None:
    """A 422 naming `what` if `text` nests arrays and objects deeper than MAX_DEPTH."""
    if text.count(b"[") + text.count(b"{") > MAX_DEPTH and deeper_than(text, MAX_DEPTH):
        raise HttpError(
            422,
            "VALIDATION_ERROR",
            f"{what} nests arrays and objects deeper than {MAX_DEPTH} levels",
        )


def deeper_than(text: bytes, limit: int) -> bool:
    """Whether arrays and objects in `text` nest deeper than `limit`, brackets in strings not
    counted (of invalid JSON: whether a decoder would before it fails)."""
    # escapes read pairwise from the left, as in a string: the quotes left delimit strings
    unescaped = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    syntax = unescaped.translate(None, _NOT_SYNTAX)  # byte operations so far: cheap at any size
    depth = 0
    for bracket in b"".join(syntax.split(b'"')[::2]):  # those outside strings
        depth += 1 if bracket in _OPENING else -1
        if depth > limit:
            return True
    return False
