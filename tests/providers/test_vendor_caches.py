"""The loopback vendors' prompt caches keep the vendors' rules (tests.providers.caching):
the cost benchmark and the caching tests are only as true as these."""

from __future__ import annotations

from typing import Any

from tests.providers import wire
from tests.providers.caching import ClaudeCache, Counted, OpenAICache
from tests.providers.loopback import Request

MARK = {"cache_control": {"type": "ephemeral"}}
SONNET, HAIKU = "claude-sonnet-4-6", "claude-haiku-3-5"


def text(n: int, size: int = 362) -> dict[str, Any]:
    """A text block of about 100 tokens (its canonical JSON with where it is: 400 bytes)."""
    return {"type": "text", "text": f"{n:04}" + "x" * (size - 4)}


def claude(blocks: list[dict[str, Any]], marked: set[int], model: str = SONNET) -> dict[str, Any]:
    content = [b | MARK if i in marked else b for i, b in enumerate(blocks)]
    return {"model": model, "messages": [{"role": "user", "content": content}]}


def test_an_anthropic_breakpoint_writes_its_prefix_and_a_later_one_reads_it() -> None:
    cache, blocks = ClaudeCache(), [text(i) for i in range(30)]

    first = cache.count(claude(blocks[:12], {11}))
    second = cache.count(claude(blocks[:20], {19}))  # 8 blocks on: within the lookback
    same = cache.count(claude(blocks[:20], {19}))

    assert first.read == 0 and first.written == first.prompt > 1024
    assert second.read == first.prompt and second.written == second.prompt - first.prompt
    assert (same.read, same.written) == (same.prompt, 0)


def test_anthropic_looks_back_twenty_blocks_from_a_breakpoint() -> None:
    blocks = [text(i) for i in range(40)]
    for added, read in [(20, True), (21, False)]:
        cache = ClaudeCache()
        written = cache.count(claude(blocks[:12], {11}))
        later = cache.count(claude(blocks[: 12 + added], {11 + added}))
        assert later.read == (written.prompt if read else 0)
        # a second breakpoint where the last prompt ended reads it however far back
        cache = ClaudeCache()
        cache.count(claude(blocks[:12], {11}))
        assert cache.count(claude(blocks[: 12 + added], {11, 11 + added})).read == written.prompt


def test_anthropic_caches_no_prefix_shorter_than_the_models_minimum() -> None:
    blocks = [text(i) for i in range(30)]
    for model, cached in [(SONNET, 11), (HAIKU, 21)]:  # 1,024 and 2,048 tokens
        cache = ClaudeCache()
        short = cache.count(claude(blocks[: cached - 1], {cached - 2}, model))
        long = cache.count(claude(blocks[:cached], {cached - 1}, model))
        assert (short.written, long.written) == (0, long.prompt)
        assert short.prompt < (1024 if model == SONNET else 2048) <= long.prompt


def test_anthropic_refuses_more_than_four_breakpoints() -> None:
    blocks = [text(i) for i in range(6)]
    request = Request("/v1/messages", {}, claude(blocks, {0, 1, 2, 3, 4}))

    reply = wire.anthropic(wire.Turn("Hi."), request, ClaudeCache())

    assert reply.status == 400
    assert reply.body["error"]["type"] == "invalid_request_error"
    assert "Found 5" in reply.body["error"]["message"]


def responses(n: int, key: str | None = "conversation") -> dict[str, Any]:
    """A Responses request of n items of 40 tokens each (their canonical JSON: 160 bytes)."""
    items = [{"role": "user", "content": f"{i:04}" + "y" * 128} for i in range(n)]
    return {"input": items, "tools": []} | ({"prompt_cache_key": key} if key else {})


def test_openai_reads_the_longest_shared_prefix_in_steps_of_128_tokens_from_1024() -> None:
    cache = OpenAICache()
    path = "/v1/responses"

    first = cache.count(path, responses(30))  # 1,200 tokens
    second = cache.count(path, responses(40))  # 1,600, of which the first 1,200 were sent
    short = OpenAICache()
    below = [short.count(path, responses(25)), short.count(path, responses(25))]  # 1,000

    assert (first.prompt, first.read) == (1200, 0)
    assert (second.prompt, second.read) == (1600, 1152)  # 1,024 + 128: the steps within
    assert [c.read for c in below] == [0, 0]  # under 1,024 tokens nothing is cached
    assert cache.count(path, responses(40, key="another")) == Counted(1600)  # another machine
