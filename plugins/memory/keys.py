"""Idempotency keys: the first claim of a key stands, with its answer once known; and
secrets: the first one stored under a name stands."""

from __future__ import annotations

from runpoint.plugins.memory.tables import Tables


class Keys(Tables):
    async def claim_key(
        self, scope: str, key: str, fingerprint: str
    ) -> tuple[str, str | None] | None:
        standing = self._keys.get((scope, key))
        if standing is None:
            self._keys[scope, key] = (fingerprint, None)
        return standing

    async def answer_key(self, scope: str, key: str, answer: str) -> None:
        if standing := self._keys.get((scope, key)):
            self._keys[scope, key] = (standing[0], answer)

    async def release_key(self, scope: str, key: str) -> None:
        self._keys.pop((scope, key), None)

    async def secret(self, name: str, new: bytes) -> bytes:
        return self._secrets.setdefault(name, new)
