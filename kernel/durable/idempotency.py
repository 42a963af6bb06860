"""Idempotency keys: a retried request (same key, same request) starts nothing new and
gets the first request's answer, however many retries arrive at once and in whichever
process; the same key with another request is refused.

The first request claims the key under a lease, renewed while it is under way, and the
write that makes its run (or session) answers the key in the same transaction. So a
request whose process dies leaves an answer (its run was made: a retry gets that run) or
a claim that runs out (nothing was made: the next retry takes the key over and makes it),
never a run without an answer. A request whose claim ran out and was taken over while it
was still going (its process stalled) makes nothing, and gets the retry's answer."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

import msgspec

from runpoint.core import tenancy
from runpoint.core.errors import ClaimLost, Conflict, InvalidRequest
from runpoint.core.types import KeyAnswer, KeyClaim, Lease
from runpoint.durable.leases import Leases
from runpoint.seams.storage import Storage

T = TypeVar("T")
POLL_SECONDS = 0.05


async def once(
    storage: Storage,
    leases: Leases,
    key: str,
    operation: str,
    request: msgspec.Struct,
    start: Callable[[KeyClaim], Awaitable[T]],
    replay: Callable[[str], Awaitable[T]],
    *,
    wait_seconds: float,
) -> T:
    """`start(claim)` the first time `key` comes with `request` (its write answers `claim`:
    see `answering`); afterwards `replay` the answer (waiting, up to `wait_seconds`, while
    the first is under way and its claim has not run out).

    `operation` names what is done to what (`create_run <agent_id>`): each has its own keys.
    `request` is the fingerprint: every field that decides what is done, none of those that
    only say how the answer is delivered (whether it is streamed)."""
    # each team has its own keys: another team's key neither replays nor collides
    claim = KeyClaim(f"{tenancy.current().team} {operation}", key, leases.lease().owner)
    fingerprint = hashlib.sha256(msgspec.json.encode(request)).hexdigest()
    deadline = asyncio.get_running_loop().time() + wait_seconds
    while True:
        until = leases.lease(claim.owner).expires_at
        if (standing := await storage.claim_key(claim, fingerprint, until)) is None:
            try:
                return await _holding(storage, leases, claim, start)
            except ClaimLost:
                continue  # a retry took the key over: its answer is this request's
        claimed_for, answer = standing
        if claimed_for != fingerprint:
            raise InvalidRequest(f"Idempotency-Key {key!r} was used for another request")
        if answer is not None:
            return await replay(answer)
        if asyncio.get_running_loop().time() >= deadline:
            raise Conflict(f"the first request with Idempotency-Key {key!r} is still under way")
        await asyncio.sleep(POLL_SECONDS)


def answering(claim: KeyClaim | None, answer: str) -> KeyAnswer | None:
    """What the write that makes a keyed request's run (or session), `answer`, records on
    its key (nothing for a request without one)."""
    return None if claim is None else claim.answered(answer)


async def _holding(
    storage: Storage, leases: Leases, claim: KeyClaim, start: Callable[[KeyClaim], Awaitable[T]]
) -> T:
    """`start(claim)`, renewing the claim while it goes; a request that fails gives the key
    up (unless its run was made), so a retry starts afresh."""

    async def renew(lease: Lease) -> None:
        await storage.renew_key(claim, lease.expires_at)

    try:
        async with leases.renewing(claim.owner, renew):
            return await start(claim)
    except BaseException:
        await storage.release_key(claim)
        raise
