"""Idempotency keys: a retried request (same key, same request) starts nothing new and
gets the first request's answer, however many retries arrive at once and in whichever
process; the same key with another request is refused."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec

from runpoint import tenancy
from runpoint.errors import Conflict, InvalidRequest
from runpoint.storage import Storage

T = TypeVar("T")
POLL_SECONDS = 0.05


async def once(
    storage: Storage,
    key: str,
    operation: str,
    request: msgspec.Struct,
    start: Callable[[], Awaitable[T]],
    identify: Callable[[T], str],
    replay: Callable[[str], Awaitable[T]],
    *,
    wait_seconds: float,
) -> T:
    """`start()` the first time `key` comes with `request`; afterwards `replay` the id
    `identify` gave its answer (waiting, up to `wait_seconds`, while the first is under way).

    `operation` names what is done to what (`create_run <agent_id>`): each has its own keys.
    `request` is the fingerprint: every field that decides what is done, none of those that
    only say how the answer is delivered (whether it is streamed)."""
    # each team has its own keys: another team's key neither replays nor collides
    scope = f"{tenancy.current().team} {operation}"
    fingerprint = hashlib.sha256(msgspec.json.encode(request)).hexdigest()
    deadline = asyncio.get_running_loop().time() + wait_seconds
    while (standing := await storage.claim_key(scope, key, fingerprint)) is not None:
        claimed_for, answer = standing
        if claimed_for != fingerprint:
            raise InvalidRequest(f"Idempotency-Key {key!r} was used for another request")
        if answer is not None:
            return await replay(answer)
        if asyncio.get_running_loop().time() >= deadline:
            raise Conflict(f"the first request with Idempotency-Key {key!r} is still under way")
        await asyncio.sleep(POLL_SECONDS)
    try:
        result = await start()
    except BaseException:
        await storage.release_key(scope, key)  # a failed request leaves no answer behind
        raise
    await storage.answer_key(scope, key, identify(result))
    return result
