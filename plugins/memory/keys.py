"""Idempotency keys: the first claim of a key stands (until its lease runs out, unanswered),
with its answer once known; and secrets: the first one stored under a name stands."""

from __future__ import annotations

from runpoint.core.types import KeyClaim, now
from runpoint.plugins.memory.tables import KeyRow, Tables


class MemoryKeys(Tables):
    async def claim_key(
        self, claim: KeyClaim, fingerprint: str, until: float
    ) -> tuple[str, str | None] | None:
        standing = self._keys.get((claim.scope, claim.key))
        if standing is None or (standing.answer is None and standing.expires_at < now()):
            self._keys[claim.scope, claim.key] = KeyRow(fingerprint, claim.owner, until, now())
            return None
        return standing.fingerprint, standing.answer

    async def renew_key(self, claim: KeyClaim, until: float) -> None:
        if row := self._held(claim):
            self._keys[claim.scope, claim.key] = row._replace(expires_at=until)

    async def release_key(self, claim: KeyClaim) -> None:
        if self._held(claim):
            del self._keys[claim.scope, claim.key]

    async def remove_answered_keys(self, before: float, limit: int) -> int:
        old = sorted(
            (row.created_at, k)
            for k, row in self._keys.items()
            if row.answer is not None and row.created_at < before
        )[:limit]
        for _, k in old:
            del self._keys[k]
        return len(old)

    async def secret(self, name: str, new: bytes) -> bytes:
        return self._secrets.setdefault(name, new)
