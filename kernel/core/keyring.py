"""Encryption at rest: a keyring of AES-256-GCM keys by id. The first key seals, every key
opens. A sealed document is `MAGIC`, its key id's length and the id, a 12-byte nonce, then
the ciphertext and its tag; the associated data a storage gives (the row's table, key and
column) binds it to its row, so a ciphertext copied onto another row fails to open.

A document kept in the clear is JSON, which never starts with `MAGIC`: the two are told
apart by their first byte."""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from runpoint.core.errors import ConfigurationError

MAGIC = 0x01
KEY_BYTES = 32
_NONCE = 12


class Unopened(Exception):
    """A sealed document that would not open: why, in words (never its content)."""


class Keyring:
    def __init__(self, keys: Mapping[str, bytes]) -> None:
        if not keys:
            raise ConfigurationError("the keyring holds no key")
        for key_id, key in keys.items():
            if not key_id or len(key_id.encode()) > 255 or not key_id.isprintable():
                raise ConfigurationError(f"key id {key_id!r} is not 1 to 255 printable bytes")
            if len(key) != KEY_BYTES:
                raise ConfigurationError(
                    f"key {key_id!r} is {len(key)} bytes; AES-256 keys are {KEY_BYTES}"
                )
        # by the header a document sealed under it starts with
        self._ciphers = {_header(key_id): AESGCM(key) for key_id, key in keys.items()}
        self.current = next(iter(keys))
        self._header = _header(self.current)
        self._seal = self._ciphers[self._header].encrypt

    @classmethod
    def from_file(cls, path: str) -> Keyring:
        """The keys of a file: one a line, `id base64-of-32-bytes`, the sealing key first;
        blank lines and lines starting with # are skipped."""
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"encryption keys {path}: cannot read it ({exc})") from exc
        keys: dict[str, bytes] = {}
        for number, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key_id, _, encoded = line.strip().partition(" ")
            try:
                keys[key_id] = base64.b64decode(encoded.strip(), validate=True)
            except binascii.Error as exc:
                raise ConfigurationError(
                    f"encryption keys {path}, line {number}: want 'id base64-key'"
                ) from exc
        try:
            return cls(keys)
        except ConfigurationError as exc:
            raise ConfigurationError(f"encryption keys {path}: {exc}") from exc

    def seal(self, plain: bytes, aad: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        return self._header + nonce + self._seal(nonce, plain, aad)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        if not sealed or sealed[0] != MAGIC:
            raise Unopened("stored in the clear")
        start = 2 + sealed[1]
        if (cipher := self._ciphers.get(sealed[:start])) is None:
            key_id = key_id_of(sealed)
            raise Unopened(f"sealed under key {key_id!r}, which the keyring does not hold")
        try:
            return cipher.decrypt(sealed[start : start + _NONCE], sealed[start + _NONCE :], aad)
        except InvalidTag:
            raise Unopened("failed authentication (altered, or another row's)") from None


def _header(key_id: str) -> bytes:
    return bytes([MAGIC, len(key_id.encode())]) + key_id.encode()


def key_id_of(stored: bytes) -> str | None:
    """The id of the key a document is sealed under; None if it is in the clear."""
    if not stored or stored[0] != MAGIC:
        return None
    return bytes(stored[2 : 2 + stored[1]]).decode(errors="replace")


def new_key() -> str:
    """A fresh key, base64, for a keyring file."""
    return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()
