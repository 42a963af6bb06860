"""Idempotency keys: the first answer to a request, replayed to its retries."""

from __future__ import annotations

from sqlalchemy import ColumnElement, and_, delete, select, update

from runpoint.plugins.sql.database import Database
from runpoint.plugins.sql.documents import Decoder, document
from runpoint.plugins.sql.schema import idempotency_keys
from runpoint.types import now

_decode_answer = Decoder(str)


class SqlIdempotencyKeys:
    db: Database

    async def claim_key(
        self, scope: str, key: str, fingerprint: str
    ) -> tuple[str, str | None] | None:
        row = {"scope": scope, "key": key, "fingerprint": fingerprint, "created_at": now()}
        async with self.db.write() as conn:
            claimed = await conn.execute(self.db.insert_new(idempotency_keys).values(row))
            if claimed.rowcount == 1:
                return None
            standing = (
                await conn.execute(
                    select(idempotency_keys.c.fingerprint, idempotency_keys.c.response).where(
                        _key(scope, key)
                    )
                )
            ).one()
        answer = standing.response
        return standing.fingerprint, None if answer is None else _decode_answer(answer)

    async def answer_key(self, scope: str, key: str, answer: str) -> None:
        async with self.db.write() as conn:
            await conn.execute(
                update(idempotency_keys).where(_key(scope, key)).values(response=document(answer))
            )

    async def release_key(self, scope: str, key: str) -> None:
        async with self.db.write() as conn:
            await conn.execute(delete(idempotency_keys).where(_key(scope, key)))


def _key(scope: str, key: str) -> ColumnElement[bool]:
    return and_(idempotency_keys.c.scope == scope, idempotency_keys.c.key == key)
