"""Cursors a client holds (a page token, an event id) in an opaque form: a position sealed
with AES-SIV under the database's secret, the session it belongs to as associated data.

Deterministic, so the same position of a session always gives the same text; sealed, so
the position (a row counter shared by every team, or a session's event count) never
shows; authenticated, so a token altered, made up, or taken from another session (or
another kind of cursor) does not open."""

from __future__ import annotations

import base64
import binascii
import re

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESSIV

_POSITION_BYTES = 8
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")  # what `seal` writes (base64url without padding)


class Cursors:
    def __init__(self, key: bytes) -> None:
        self._cipher = AESSIV(key)

    def seal(self, kind: str, session_id: str, position: int) -> str:
        """`position` of `session_id`'s `kind` of cursor as 32 URL-safe characters."""
        plain = position.to_bytes(_POSITION_BYTES, "big", signed=True)
        sealed = self._cipher.encrypt(plain, [kind.encode(), session_id.encode()])
        return base64.urlsafe_b64encode(sealed).decode().rstrip("=")

    def open(self, kind: str, session_id: str, token: str) -> int | None:
        """The position `token` seals, if `seal` made it for this kind and session."""
        if not _TOKEN.fullmatch(token):
            return None
        try:
            sealed = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
            plain = self._cipher.decrypt(sealed, [kind.encode(), session_id.encode()])
        except (binascii.Error, ValueError, InvalidTag):
            return None
        return int.from_bytes(plain, "big", signed=True)
