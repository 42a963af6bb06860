"""Checks of idempotency keys (a claim under a lease, answered by the write that makes its
run, taken over once it ran out unanswered) and of secrets."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from runpoint.conformance import build
from runpoint.conformance.sessions import refused
from runpoint.conformance.suite import Capability, check
from runpoint.core.errors import ClaimLost
from runpoint.core.types import KeyAnswer, KeyClaim, now
from runpoint.seams.storage import Storage

IDEMPOTENCY = Capability.IDEMPOTENCY
LIVE, RAN_OUT = 60.0, -1.0  # a claim's term from now


def claim(owner: str, scope: str | None = None, key: str | None = None) -> KeyClaim:
    return KeyClaim(scope or build.fresh("scope"), key or build.fresh("key"), owner)


def by(other: str, of: KeyClaim) -> KeyClaim:
    """Another owner's claim of the same key."""
    return KeyClaim(of.scope, of.key, other)


@check(IDEMPOTENCY)
async def the_first_claim_of_a_key_stands_with_its_answer(store: Storage) -> None:
    first = claim("first")
    assert await store.claim_key(first, "fingerprint-1", now() + LIVE) is None
    assert await store.claim_key(by("second", first), "fingerprint-2", now() + LIVE) == (
        "fingerprint-1",
        None,
    )
    session = build.session()
    run = build.run(session)
    await store.create_sessions([session], [run], answering=first.answered(run.run_id))
    assert await store.claim_key(by("third", first), "fingerprint-1", now() + LIVE) == (
        "fingerprint-1",
        run.run_id,
    )


@check(IDEMPOTENCY)
async def keys_are_claimed_per_scope(store: Storage) -> None:
    key = build.fresh("key")
    assert await store.claim_key(claim("a", key=key), "f", now() + LIVE) is None
    assert await store.claim_key(claim("b", key=key), "f", now() + LIVE) is None


@check(IDEMPOTENCY)
async def a_released_key_is_claimed_afresh(store: Storage) -> None:
    failed = claim("failed", key="k" * 255)
    assert await store.claim_key(failed, "failed", now() + LIVE) is None
    await store.release_key(failed)
    retry = by("retry", failed)
    assert await store.claim_key(retry, "retry", now() + LIVE) is None
    await store.release_key(failed)  # not the owner's any more: nothing
    assert await store.claim_key(by("again", failed), "again", now() + LIVE) == ("retry", None)


@check(IDEMPOTENCY)
async def of_concurrent_claims_of_a_key_one_wins(store: Storage) -> None:
    first = claim("0")
    claims = await asyncio.gather(
        *(store.claim_key(by(str(i), first), f"f{i}", now() + LIVE) for i in range(4))
    )
    assert sum(standing is None for standing in claims) == 1, claims


@check(IDEMPOTENCY)
async def a_claim_that_ran_out_unanswered_is_taken_over_and_a_live_one_is_not(
    store: Storage,
) -> None:
    died = claim("died")
    assert await store.claim_key(died, "f", now() + RAN_OUT) is None
    # taken over whatever request it was for: nothing was made for the first
    retry = by("retry", died)
    assert await store.claim_key(retry, "g", now() + LIVE) is None, "not taken over"
    assert await store.claim_key(by("another", died), "f", now() + LIVE) == ("g", None)
    # a renewed claim stands; a renewal by another owner changes nothing
    renewed = claim("renewed")
    await store.claim_key(renewed, "f", now() + RAN_OUT)
    await store.renew_key(renewed, now() + LIVE)
    await store.renew_key(by("stranger", renewed), now() + RAN_OUT)
    assert await store.claim_key(by("another", renewed), "f", now() + LIVE) == ("f", None)


@check(IDEMPOTENCY)
async def an_answered_claim_stands_however_old(store: Storage) -> None:
    old = claim("old")
    await store.claim_key(old, "f", now() + RAN_OUT)
    _, run = await build.started(store)
    await store.save(run, [], None, answering=old.answered(run.run_id))
    await store.release_key(old)  # its run was made: the answer stands
    assert await store.claim_key(by("retry", old), "f", now() + LIVE) == ("f", run.run_id)
    assert await store.get_run(run.run_id) == run


@check(IDEMPOTENCY)
async def every_write_that_starts_a_run_answers_its_claim(store: Storage) -> None:
    session, source = await build.started(store)
    new_session = build.session()
    new, joined, fork = build.run(new_session), build.run(session), build.fork(source, 0)
    writes: list[tuple[Callable[[KeyAnswer], Awaitable[object]], str]] = [
        (lambda a: store.create_sessions([new_session], [new], answering=a), new.run_id),
        (lambda a: store.start_in_session(joined, answering=a), joined.run_id),
        (lambda a: store.create_runs([fork], answering=a), fork.run_id),
        (lambda a: store.save(source, [], None, answering=a), source.run_id),  # in place
    ]
    for write, answer in writes:
        key = claim("me")
        await store.claim_key(key, "f", now() + LIVE)
        await write(key.answered(answer))
        assert await store.claim_key(by("retry", key), "f", now() + LIVE) == ("f", answer)


@check(IDEMPOTENCY)
async def a_write_whose_claim_was_taken_over_writes_nothing(store: Storage) -> None:
    stalled = claim("stalled")
    await store.claim_key(stalled, "f", now() + RAN_OUT)
    retry = by("retry", stalled)
    await store.claim_key(retry, "f", now() + LIVE)
    session = build.session()
    run = build.run(session)
    await refused(
        store.create_sessions([session], [run], answering=stalled.answered(run.run_id)), ClaimLost
    )
    assert await store.get_session(session.session_id) is None
    assert await store.get_run(run.run_id) is None
    assert await store.claim_key(by("another", stalled), "f", now() + LIVE) == ("f", None)
    # the claim is the retry's still: its write answers it
    await store.create_sessions([session], [run], answering=retry.answered(run.run_id))
    assert await store.claim_key(by("another", stalled), "f", now() + LIVE) == ("f", run.run_id)


@check(IDEMPOTENCY)
async def the_first_secret_stored_under_a_name_stands(store: Storage) -> None:
    name = build.fresh("secret")[:64]
    assert await store.secret(name, b"\x00first") == b"\x00first"
    assert await store.secret(name, b"second") == b"\x00first"
    assert await store.secret(build.fresh("secret")[:64], b"other") == b"other"


@check(IDEMPOTENCY)
async def old_answered_keys_are_removed_and_claims_stay(store: Storage) -> None:
    async def answered() -> KeyClaim:
        key = claim("first")
        assert await store.claim_key(key, "f", now() + LIVE) is None
        session = build.session()
        await store.create_sessions([session], [build.run(session)], answering=key.answered("a"))
        return key

    old = await answered()
    await asyncio.sleep(0.01)
    bound = now()
    recent = await answered()
    unanswered = claim("first")
    assert await store.claim_key(unanswered, "f", now() + LIVE) is None
    assert await store.remove_answered_keys(bound, 1000) >= 1
    assert await store.claim_key(by("retry", old), "g", now() + LIVE) is None, "removed"
    assert await store.claim_key(by("retry", recent), "f", now() + LIVE) == ("f", "a")
    assert await store.remove_answered_keys(now() + 1, 1) == 1, "at most `limit`"
    while await store.remove_answered_keys(now() + 1, 1000):
        pass
    assert await store.claim_key(by("retry", recent), "g", now() + LIVE) is None
    # a claim not answered stays, however old
    assert await store.claim_key(by("retry", unanswered), "g", now() + LIVE) == ("f", None)
