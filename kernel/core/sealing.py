"""Encryption at rest for any storage backend: a `Codec` seals each document a user, a
tool or a model wrote as the backend encodes it, and opens it as the backend decodes it.
The backend stores the bytes the codec gives and hands them back unchanged; ids, statuses,
timestamps and counts stay in the clear, where the backend queries them.

Each document is bound to its place (`binding`): a kind (the SQL backend's table), a
field (its column) and the row's key, the row's own (a fork reads its source's rows
under the source's run id). The binding is the ciphertext's associated data, so a
ciphertext copied onto another row fails to open (`Unreadable`). The conformance suite
checks a backend against a recording codec (runpoint.conformance.encryption).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from cryptography.exceptions import InvalidTag

from runpoint.core.errors import Unreadable
from runpoint.core.keyring import MAGIC, NONCE, TEAM_MAGIC, Keyring, TeamKeys, Unopened

log = logging.getLogger("runpoint.encryption")
Row = TypeVar("Row")
Decoded = TypeVar("Decoded")
Binding = tuple[object, ...]  # (kind, field, *the row's key)

# The opened documents a codec keeps (`Opened`), each counted as its bytes, its
# ciphertext's and ENTRY's (the key, the tuples, the dict's slot, the objects' headers:
# about 350 on CPython 3.11): up to OPENED_ENTRY each, OPENED_BYTES in all.
OPENED_ENTRY = 64 * 1024
OPENED_BYTES = 32 * 1024 * 1024
ENTRY = 400


def aad(kind: str, field: str, key: Iterable[object]) -> bytes:
    """The associated data of a document at (kind, field, *key)."""
    return "\x00".join((kind, field, *map(str, key))).encode()


class Codec:
    """Seals and opens one storage's documents; without a keyring, keeps them as they are
    (and refuses the sealed ones: they need the keyring). With one, each document is
    sealed under its team's key (`teams`), which the backend holds before it writes."""

    def __init__(self, keyring: Keyring | None = None) -> None:
        self.keyring = keyring
        self.teams = None if keyring is None else TeamKeys(keyring)
        self.clear_ok = False  # encryption is under way: documents in the clear serve
        self.failures = 0  # documents refused since start (see /metrics)
        self.opened = Opened()

    def seal(self, document: bytes, kind: str, field: str, *key: object, team: str) -> bytes:
        """What to store for `document` at its binding: its ciphertext (kept as opened: the
        first read after a write is served from memory), or itself without a keyring."""
        if self.teams is None:
            return document
        binding = (kind, field, *key)
        sealed = self.teams.seal(team, document, aad(kind, field, key))
        self.opened.keep(binding, sealed, document)
        return sealed

    def open(self, stored: bytes, kind: str, field: str, *key: object) -> bytes:
        """The document of what the backend stored at this binding, or `Unreadable`."""
        return self.open_rows(kind, field, ((*key, stored),), len(key))[0]

    def open_rows(
        self, kind: str, field: str, rows: Iterable[Sequence[Any]], keys: int
    ) -> list[bytes]:
        """The documents of rows that each start with the row's `keys` key values, then
        the stored document. Those opened (or sealed) from the very same ciphertext on the
        same row before are not opened again: a transcript is read whole, often, and one
        AES-GCM open costs more than decoding a small row."""
        if self.teams is None:
            return [self._unsealed(row[keys], (kind, field, *row[:keys])) for row in rows]
        kept, keep, found = self.opened.get, self.opened.keep, []
        ciphers = self.teams.ciphers
        prefix = f"{kind}\x00{field}\x00"
        for row in rows:
            binding, stored = (kind, field, *row[:keys]), row[keys]
            hit = kept(binding)
            if hit is not None and hit[0] == stored:
                found.append(hit[1])
                continue
            # the common case inline (a transcript is thousands of rows): under a key held
            start = 2 + stored[1] if len(stored) > 2 else 0
            cipher = ciphers.get(stored[:start])
            document = None
            if cipher is not None:
                associated = (
                    f"{prefix}{row[0]}\x00{row[1]}".encode()
                    if keys == 2
                    else aad(kind, field, row[:keys])
                )
                try:
                    document = cipher.decrypt(
                        stored[start : start + NONCE], stored[start + NONCE :], associated
                    )
                except InvalidTag:
                    document = None  # refused below, saying why
            if document is None:  # in the clear, under a key not held, or refused
                document = self._opened(stored, binding)
            if document is not stored:  # opened, not a document in the clear let through
                keep(binding, stored, document)
            found.append(document)
        return found

    def _opened(self, stored: bytes, binding: Binding) -> bytes:
        assert self.keyring is not None and self.teams is not None
        first = stored[:1]
        if first not in _SEALED and self.clear_ok:
            return stored
        try:
            kind, field, *key = binding
            associated = aad(str(kind), str(field), key)
            if first == _TEAM_SEALED:
                return self.teams.open(stored, associated)
            return self.keyring.open(stored, associated)
        except Unopened as exc:
            raise self._refused(binding, str(exc)) from None

    def _unsealed(self, stored: bytes, binding: Binding) -> bytes:
        if stored[:1] in _SEALED:
            raise self._refused(binding, "sealed, and no keyring was given")
        return stored

    def forget_opened(self) -> None:
        """A key stopped opening documents: what it opened must not be served from memory."""
        self.opened.clear()

    def _refused(self, binding: Binding, why: str) -> Unreadable:
        self.failures += 1
        kind, field, *key = binding
        row = f"{kind}({', '.join(map(str, key))}).{field}"
        log.error("stored row %s cannot be read: %s", row, why)
        return Unreadable(row, why)


class Opened(dict[Binding, tuple[bytes, bytes]]):
    """Opened documents by binding: each with the ciphertext it opened from (or was
    sealed to), so an altered or swapped row misses (and fails to open). Bounded in
    bytes: once full, it starts over. A document it holds was authenticated from (or
    sealed to) exactly the ciphertext a hit compares, so a hit is what opening that again
    would give while the key is held: clear it when a key stops opening documents."""

    size = 0

    def keep(self, binding: Binding, stored: bytes, document: bytes) -> None:
        cost = len(stored) + len(document) + ENTRY
        if cost > OPENED_ENTRY:
            return
        if self.size + cost > OPENED_BYTES:
            self.clear()
        self[binding] = (stored, document)
        self.size += cost

    def clear(self) -> None:
        super().clear()
        self.size = 0


def readable(rows: Iterable[Row], decode: Callable[[Row], Decoded]) -> list[Decoded]:
    """Each row decoded, but those that do not open (`Unreadable`, logged and counted by
    the codec): for the scans that work through rows in the background (the lease watch,
    retention, due approvals and schedules), which one bad row must not stop for all the
    others."""
    found = []
    for row in rows:
        with contextlib.suppress(Unreadable):
            found.append(decode(row))
    return found


_TEAM_SEALED = bytes([TEAM_MAGIC])
_SEALED = (bytes([MAGIC]), _TEAM_SEALED)
