"""Encryption at rest: a keyring of AES-256-GCM keys by id. The first key seals, every key
opens. A sealed document is `MAGIC`, its key id's length and the id, a 12-byte nonce, then
the ciphertext and its tag; the associated data a storage gives (the row's table, key and
column) binds it to its row, so a ciphertext copied onto another row fails to open.

A document sealed under a team's data key (`TeamKeys`) has the same layout behind
`TEAM_MAGIC`, the team key's id in place of the keyring key's. A team key is random, kept
wrapped (sealed) by the keyring's first key where the storage keeps it, so deleting that
wrapped copy makes the team's documents unopenable for good (crypto-shredding), and a new
keyring key only re-wraps the team keys.

A document kept in the clear is JSON, which never starts with `MAGIC` or `TEAM_MAGIC`:
they are told apart by their first byte."""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from runpoint.core.errors import ConfigurationError

MAGIC = 0x01
TEAM_MAGIC = 0x02
_TEAM = bytes([TEAM_MAGIC])
_NONE = b"\xff"  # the start of no document
KEY_BYTES = 32
NONCE = 12


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
        self.ciphers = {_header(key_id): AESGCM(key) for key_id, key in keys.items()}
        self.current = next(iter(keys))
        self._header = _header(self.current)
        self._seal = self.ciphers[self._header].encrypt

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
        nonce = os.urandom(NONCE)
        return self._header + nonce + self._seal(nonce, plain, aad)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        if not sealed or sealed[0] != MAGIC:
            raise Unopened("stored in the clear")
        start = 2 + sealed[1]
        if (cipher := self.ciphers.get(sealed[:start])) is None:
            key_id = key_id_of(sealed)
            raise Unopened(f"sealed under key {key_id!r}, which the keyring does not hold")
        try:
            return cipher.decrypt(sealed[start : start + NONCE], sealed[start + NONCE :], aad)
        except InvalidTag:
            raise Unopened("failed authentication (altered, or another row's)") from None


def _header(key_id: str, magic: int = MAGIC) -> bytes:
    return bytes([magic, len(key_id.encode())]) + key_id.encode()


class TeamKeys:
    """The teams' data keys a process holds, unwrapped: one a team at a time (a new one
    for a team means its last was erased). Seals a team's documents under its key, and
    opens a document under the team key its header names."""

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring
        # by header: the team keys held, and the keyring's (their headers differ in their
        # first byte), for `runpoint.core.sealing.Codec.open_rows`
        self.ciphers: dict[bytes, AESGCM] = dict(keyring.ciphers)
        self._teams: dict[str, bytes] = {}  # team -> the header of its key
        self._refused: dict[bytes, str] = {}  # headers that will not open, and why
        self._last = _NONE  # the header of a key held or refused, met last by `missing`

    def held(self, team: str) -> bool:
        return team in self._teams

    @staticmethod
    def new() -> tuple[str, bytes]:
        """A new team key: its id and the key itself."""
        return secrets.token_hex(8), AESGCM.generate_key(bit_length=256)

    def wrap(self, team: str, key_id: str, key: bytes) -> bytes:
        return self.keyring.seal(key, _wrapping(team, key_id))

    def unwrap(self, team: str, key_id: str, wrapped: bytes) -> bytes:
        return self.keyring.open(wrapped, _wrapping(team, key_id))

    def hold(self, team: str, key_id: str, wrapped: bytes) -> None:
        """Hold `team`'s key (from its stored, wrapped copy), in place of any it had."""
        self.drop(team)
        header = _header(key_id, TEAM_MAGIC)
        try:
            self.ciphers[header] = AESGCM(self.unwrap(team, key_id, wrapped))
        except Unopened as exc:
            self._refused[header] = f"its team key {key_id!r} does not unwrap: {exc}"
            return
        self._teams[team] = header

    def refused(self, key_id: str) -> str:
        """Why the team key `key_id` is not held."""
        return self._refused.get(_header(key_id, TEAM_MAGIC), "not held")

    def drop(self, team: str) -> None:
        if (header := self._teams.pop(team, None)) is not None:
            self.ciphers.pop(header, None)
            self._last = _NONE

    def erased(self, key_ids: Iterable[str]) -> None:
        """These keys are gone from the storage: their documents never open again."""
        for key_id in key_ids:
            header = _header(key_id, TEAM_MAGIC)
            self.ciphers.pop(header, None)
            self._refused[header] = f"sealed under team key {key_id!r}, which was erased"

    def missing(self, rows: Iterable[Sequence[Any]], positions: Sequence[int]) -> set[str]:
        """The ids of the team keys that the documents at `positions` of `rows` are sealed
        under and that this process neither holds nor knows to be gone."""
        found = set()
        for i in positions:
            column = [row[i] for row in rows]
            # most reads: every document under the key met last (a read is mostly one
            # team's), told in C, document by document
            if all(map(bytes.startswith, filter(None, column), repeat(self._last))):
                continue
            for value in column:
                if value.__class__ is bytes and value[:1] == _TEAM:
                    header = value[: 2 + value[1]]
                    if header in self.ciphers or header in self._refused:
                        self._last = header
                    else:
                        found.add(header[2:].decode(errors="replace"))
        return found

    def seal(self, team: str, plain: bytes, aad: bytes) -> bytes:
        # the storage holds the key of a team before it writes
        return self.seal_under(self._teams[team], plain, aad)

    def seal_under(self, header: bytes, plain: bytes, aad: bytes) -> bytes:
        """`plain` sealed under the key a document's `header` names (held)."""
        nonce = os.urandom(NONCE)
        return header + nonce + self.ciphers[header].encrypt(nonce, plain, aad)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        start = 2 + sealed[1]
        header = sealed[:start]
        if (cipher := self.ciphers.get(header)) is None:
            why = self._refused.get(header)
            key_id = header[2:].decode(errors="replace")
            raise Unopened(why or f"sealed under team key {key_id!r}, which is not held")
        try:
            return cipher.decrypt(sealed[start : start + NONCE], sealed[start + NONCE :], aad)
        except InvalidTag:
            raise Unopened("failed authentication (altered, or another row's)") from None


def _wrapping(team: str, key_id: str) -> bytes:
    """The associated data of a wrapped team key: it opens as this team's, this key's."""
    return "\x00".join(("team_keys", team, key_id)).encode()


def key_id_of(stored: bytes) -> str | None:
    """The id of the key a document is sealed under (a team key's too); None if it is in
    the clear."""
    if not stored or stored[0] not in (MAGIC, TEAM_MAGIC):
        return None
    return bytes(stored[2 : 2 + stored[1]]).decode(errors="replace")


def new_key() -> str:
    """A fresh key, base64, for a keyring file."""
    return base64.b64encode(AESGCM.generate_key(bit_length=256)).decode()
