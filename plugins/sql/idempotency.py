"""Idempotency keys: a request's claim (a lease, until its run is made), then the answer
replayed to its retries."""

from __future__ import annotations

import msgspec
from sqlalchemy import ColumnElement, and_, delete, or_, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection

from runpoint.core.errors import ClaimLost
from runpoint.core.types import KeyAnswer, KeyClaim, now
from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.documents import document
from runpoint.plugins.sql.schema import idempotency_keys as keys

_decode_answer = msgspec.json.Decoder(str).decode


class SqlIdempotencyKeys:
    db: Database

    async def claim_key(
        self, claim: KeyClaim, fingerprint: str, until: float
    ) -> tuple[str, str | None] | None:
        held = {"fingerprint": fingerprint, "owner": claim.owner, "expires_at": until}
        row = {"scope": claim.scope, "key": claim.key, "created_at": now()} | held
        claim_it = self.db.insert_new(keys).values(row)
        async with self.db.single_write() as conn:  # a new key, mostly: one statement
            claimed = await conn.execute(claim_it)
        while claimed.rowcount != 1:
            async with self.db.write() as conn:
                ran_out = or_(keys.c.expires_at.is_(None), keys.c.expires_at < now())
                taken_over = await conn.execute(
                    update(keys).where(_unanswered(claim), ran_out).values(held)
                )
                if taken_over.rowcount == 1:
                    return None
                standing = (
                    await conn.execute(
                        select(keys.c.fingerprint, keys.c.response).where(_key(claim))
                    )
                ).one_or_none()
                if standing is None:  # released since it was found: claim it afresh
                    claimed = await conn.execute(claim_it)
                    continue
            answer = standing.response
            return standing.fingerprint, None if answer is None else _decode_answer(answer)
        return None

    async def renew_key(self, claim: KeyClaim, until: float) -> None:
        async with self.db.write() as conn:
            await conn.execute(update(keys).where(_held(claim)).values(expires_at=until))

    async def release_key(self, claim: KeyClaim) -> None:
        async with self.db.write() as conn:
            await conn.execute(delete(keys).where(_held(claim)))

    async def remove_answered_keys(self, before: float, limit: int) -> int:
        old = (
            select(keys.c.scope, keys.c.key)
            .where(keys.c.created_at < before, keys.c.response.is_not(None))
            .order_by(keys.c.created_at)
            .limit(limit)
        )
        async with self.db.write() as conn:
            gone = await conn.execute(delete(keys).where(tuple_(keys.c.scope, keys.c.key).in_(old)))
            return int(gone.rowcount)


async def record_answer(conn: AsyncConnection, answering: KeyAnswer | None) -> None:
    """Answer a claimed key in the caller's transaction, first (ClaimLost, and the caller
    writes nothing, if the claim is not its owner's any more)."""
    if answering is None:
        return
    claim = answering.claim
    answered = await conn.execute(
        update(keys).where(_held(claim)).values(response=document(answering.answer))
    )
    if answered.rowcount != 1:
        raise ClaimLost(f"Idempotency-Key {claim.key!r} was taken over by a retry")


def _key(claim: KeyClaim) -> ColumnElement[bool]:
    return and_(keys.c.scope == claim.scope, keys.c.key == claim.key)


def _unanswered(claim: KeyClaim) -> ColumnElement[bool]:
    return and_(_key(claim), keys.c.response.is_(None))


def _held(claim: KeyClaim) -> ColumnElement[bool]:
    """The key, claimed by `claim.owner` and unanswered (whether or not its lease ran out:
    until another takes it over, nobody else made anything for it)."""
    return and_(_unanswered(claim), keys.c.owner == claim.owner)
