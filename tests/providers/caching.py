"""The vendors' prompt caches, as the loopback servers keep them, and the tokens a request
is billed for.

Tokens are counted by a deterministic approximation, not by a vendor's tokenizer: one token
for every 4 bytes of the prompt's canonical JSON (keys sorted, no spaces, `cache_control`
marks left out), rounded up (for Anthropic, block by block). The caching rules are the
vendors' documented ones:

- Anthropic (prompt caching guide): the prompt is tools, then system, then the messages'
  content blocks, in that order. At most 4 blocks carry `cache_control` (more is a 400). A
  breakpoint writes the prefix up to its block, if that prefix is at least the model's
  minimum cacheable length (1,024 tokens for Sonnet and Opus 4 models, 2,048 for Haiku),
  and reads the longest prefix already written at its block or at one of the 20 blocks
  before it. Usage: `cache_read_input_tokens` (read), `cache_creation_input_tokens` (from
  the read prefix to the last breakpoint written), `input_tokens` (the rest).
- OpenAI (prompt caching guide): any prompt of 1,024 tokens or more is cached by itself;
  a later prompt reads the longest prefix it shares with one, counted in steps of 128
  tokens from 1,024 (`cached_tokens`), among prompts sent with its `prompt_cache_key`
  (the key routes requests to the machines that hold their prefixes).

Entries never expire here (the vendors keep one for 5 to 10 minutes from its last use).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

BYTES_PER_TOKEN = 4
LOOKBACK = 20  # blocks before a breakpoint at which Anthropic looks for a cached prefix
MAX_BREAKPOINTS = 4
OPENAI_MINIMUM = 1024
OPENAI_STEP = 128


@dataclass(frozen=True)
class Counted:
    """A request's input tokens as the vendor bills them: of `prompt`, `read` from the
    cache and `written` to it."""

    prompt: int
    read: int = 0
    written: int = 0


class TooManyBreakpoints(Exception):
    pass


def unmarked(value: Any) -> Any:
    """`value` without its `cache_control` marks: what the model reads."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def canonical(item: Any) -> bytes:
    return json.dumps(unmarked(item), sort_keys=True, separators=(",", ":")).encode()


def tokens(data: bytes) -> int:
    return -(-len(data) // BYTES_PER_TOKEN)


def claude_minimum(model: str) -> int:
    return 2048 if "haiku" in model else 1024


@dataclass
class ClaudeCache:
    """Prefixes written at breakpoints, by the digest of the model and the blocks."""

    entries: set[bytes] = field(default_factory=set)

    def count(self, body: dict[str, Any]) -> Counted:
        blocks = claude_blocks(body)
        marks = [i for i, (_, marked) in enumerate(blocks) if marked]
        if len(marks) > MAX_BREAKPOINTS:
            raise TooManyBreakpoints(
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marks)}."
            )
        digest = hashlib.sha256(str(body.get("model")).encode())
        prefixes: list[tuple[bytes, int]] = []  # (digest, tokens) of the prompt up to a block
        total = 0
        for data, _ in blocks:
            digest.update(hashlib.sha256(data).digest())
            total += tokens(data)
            prefixes.append((digest.copy().digest(), total))
        # each breakpoint reads the longest prefix written at it or at a block before it
        read = max((self._read(prefixes[max(0, m - LOOKBACK) : m + 1]) for m in marks), default=0)
        minimum = claude_minimum(str(body.get("model")))
        cacheable = [prefixes[m] for m in marks if prefixes[m][1] >= minimum]
        self.entries.update(d for d, _ in cacheable)
        written = max((t for _, t in cacheable), default=read) - read
        return Counted(total, read, max(written, 0))

    def _read(self, window: list[tuple[bytes, int]]) -> int:
        return next((t for d, t in reversed(window) if d in self.entries), 0)


def claude_blocks(body: dict[str, Any]) -> list[tuple[bytes, bool]]:
    """The prompt's blocks in the order the cache reads them: each one's canonical bytes
    (with where it is) and whether it is a breakpoint."""
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    placed: list[tuple[Any, dict[str, Any]]] = [("tool", t) for t in body.get("tools", [])]
    placed += [("system", b) for b in system]
    for i, message in enumerate(body.get("messages", [])):
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        placed += [((i, message["role"]), b) for b in content]
    return [(canonical([where, block]), "cache_control" in block) for where, block in placed]


@dataclass
class OpenAICache:
    """Digests of every cached prompt's prefixes of 1,024 + 128k tokens, by cache key."""

    entries: set[tuple[str | None, bytes]] = field(default_factory=set)

    def count(self, path: str, body: dict[str, Any]) -> Counted:
        if path.endswith("/chat/completions"):
            items = [*body.get("tools", []), *body.get("messages", [])]
        else:
            instructions = [body["instructions"]] if body.get("instructions") else []
            items = [*body.get("tools", []), *instructions, *body.get("input", [])]
        prompt = b"".join(canonical(item) for item in items)
        key = body.get("prompt_cache_key")
        digest = hashlib.sha256()
        read, done = 0, 0
        for step in range(OPENAI_MINIMUM, tokens(prompt) + 1, OPENAI_STEP):
            end = step * BYTES_PER_TOKEN
            digest.update(prompt[done:end])
            done = end
            entry = (key, digest.copy().digest())
            if entry in self.entries:  # then so are the shorter prefixes
                read = step
            self.entries.add(entry)
        return Counted(tokens(prompt), read)
