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
from itertools import groupby, repeat
from operator import itemgetter
from typing import Any, TypeVar

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from runpoint.core.errors import Unreadable
from runpoint.core.keyring import MAGIC, NONCE, TEAM_MAGIC, Keyring, TeamKeys, Unopened

log = logging.getLogger("runpoint.encryption")
Row = TypeVar("Row")
Decoded = TypeVar("Decoded")
Binding = tuple[object, ...]  # (kind, field, *the row's key)

# The opened documents a codec keeps (`Opened`), each counted as its bytes, its
# ciphertext's and ENTRY's (the key, the tuples, the dict's slot, the objects' headers:
# about 350 on CPython 3.11): up to OPENED_ENTRY each, OPENED_BYTES in all. A larger one
# (a pack of a run's rows, plugins/sql/packs.py) costs ten times more to decode than to
# open again, and kept, each run read first grows the process by its size (page faults
# that cost as much as the opens saved).
OPENED_ENTRY = 8 * 1024
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
        # by the header a document sealed under it starts with: the team keys held, and
        # the keyring's (the one dict, changed in place as team keys come and go)
        self.ciphers: dict[bytes, AESGCM] = {} if self.teams is None else self.teams.ciphers

    def seal(self, document: bytes, kind: str, field: str, *key: object, team: str) -> bytes:
        """What to store for `document` at its binding: its ciphertext (kept as opened: the
        first read after a write is served from memory), or itself without a keyring."""
        if self.teams is None:
            return document
        binding = (kind, field, *key)
        sealed = self.teams.seal(team, document, aad(kind, field, key))
        self.opened.keep(binding, sealed, document)
        return sealed

    def seal_like(
        self, stored: bytes, document: bytes, kind: str, field: str, *key: object
    ) -> bytes:
        """`document` sealed under the key `stored` (just opened) is sealed under, or as it
        is if `stored` is in the clear: it takes the place of part of `stored`, whose team
        its writer need not know."""
        if stored[:1] not in _SEALED:
            return document
        assert self.teams is not None  # `stored` was just opened, so sealed under a key held
        sealed = self.teams.seal_under(stored[: 2 + stored[1]], document, aad(kind, field, key))
        self.opened.keep((kind, field, *key), sealed, document)
        return sealed

    def open(self, stored: bytes, kind: str, field: str, *key: object) -> bytes:
        """The document of what the backend stored at this binding, or `Unreadable`."""
        binding = (kind, field, *key)
        if self.teams is None:
            return self._unsealed(stored, binding)
        hit = self.opened.get(binding)
        return hit[1] if hit is not None and hit[0] == stored else self._kept(stored, binding)

    def open_rows(
        self, kind: str, field: str, rows: Sequence[Sequence[Any]], keys: int
    ) -> list[bytes]:
        """The documents of rows that each start with the row's `keys` key values, then
        the stored document. Those opened (or sealed) from the very same ciphertext on the
        same row before are not opened again: a transcript is read whole, often."""
        if self.teams is None:
            return [self._unsealed(row[keys], (kind, field, *row[:keys])) for row in rows]
        if len(rows) > 1 and not self.opened.groups.get((kind, field, *rows[0][: keys - 1])):
            found = self._open_fresh(kind, field, rows, keys)  # a first read
            if found is not None:
                return found
        return self._open_each(kind, field, rows, keys)

    def _open_fresh(
        self, kind: str, field: str, rows: Sequence[Sequence[Any]], keys: int
    ) -> list[bytes] | None:
        """The documents of rows all sealed under the key the first names, opened at once,
        or None if one is not, or fails to open (`_open_each` then tells which). A first
        read opens every row, and one AES-GCM open (about 0.45 us here) costs about as
        much as the rest of reading a small row: what else is done a row is done in C
        where it can be, and what is the same for a run's rows is done once."""
        first = rows[0][keys]
        header = first[: 2 + first[1]] if len(first) > 2 else _NONE
        if (cipher := self.ciphers.get(header)) is None:
            return None
        start, end, last, found = len(header), len(header) + NONCE, keys - 1, []
        for head, part in groupby(rows, itemgetter(slice(0, last))):  # a fork's segments
            segment = list(part)
            stored = [row[keys] for row in segment]
            if not all(map(bytes.startswith, stored, repeat(header))):
                return None
            items, prefix = [row[last] for row in segment], aad(kind, field, (*head, ""))
            try:
                documents = list(
                    map(
                        cipher.decrypt,
                        [s[start:end] for s in stored],
                        [memoryview(s)[end:] for s in stored],  # not copied
                        [prefix + str(item).encode() for item in items],  # = aad()'s
                    )
                )
            except InvalidTag:
                return None
            self.opened.keep_all((kind, field, *head), items, stored, documents)
            found += documents
        return found

    def _open_each(
        self, kind: str, field: str, rows: Sequence[Sequence[Any]], keys: int
    ) -> list[bytes]:
        """The documents of rows, opened one by one but those kept."""
        groups, found = self.opened.groups, []
        last, group = keys - 1, {}
        head: Any = None  # the rows' key values but the last
        for row in rows:
            if row[:last] != head:  # the first row, or a fork's next segment
                head = row[:last]
                group = groups.get((kind, field, *head), {})
            item, stored = row[last], row[keys]
            hit = group.get(item)
            if hit is not None and hit[0] == stored:
                found.append(hit[1])
                continue
            found.append(self._kept(stored, (kind, field, *head, item)))
        return found

    def _kept(self, stored: bytes, binding: Binding) -> bytes:
        """`_opened`, and kept as opened."""
        document = self._opened(stored, binding)
        if document is not stored:  # opened, not a document in the clear let through
            self.opened.keep(binding, stored, document)
        return document

    def _opened(self, stored: bytes, binding: Binding) -> bytes:
        """One document opened, or let through in the clear while encryption is under
        way, or refused (saying why)."""
        assert self.keyring is not None and self.teams is not None
        kind, field, *key = binding
        associated = aad(str(kind), str(field), key)
        start = 2 + stored[1] if len(stored) > 2 else 0
        if (cipher := self.ciphers.get(stored[:start])) is not None:  # under a key held
            try:
                return cipher.decrypt(
                    stored[start : start + NONCE], stored[start + NONCE :], associated
                )
            except InvalidTag:
                pass  # refused below, saying why
        first = stored[:1]
        if first not in _SEALED and self.clear_ok:
            return stored
        try:
            if first == _TEAM_SEALED:
                return self.teams.open(stored, associated)
            return self.keyring.open(stored, associated)
        except Unopened as exc:
            raise self.refused(binding, str(exc)) from None

    def _unsealed(self, stored: bytes, binding: Binding) -> bytes:
        if stored[:1] in _SEALED:
            raise self.refused(binding, "sealed, and no keyring was given")
        return stored

    def forget_opened(self) -> None:
        """A key stopped opening documents: what it opened must not be served from memory."""
        self.opened.clear()

    def refused(self, binding: Binding, why: str) -> Unreadable:
        """`Unreadable` for the row at `binding`, logged and counted."""
        self.failures += 1
        kind, field, *key = binding
        row = f"{kind}({', '.join(map(str, key))}).{field}"
        log.error("stored row %s cannot be read: %s", row, why)
        return Unreadable(row, why)


class Opened:
    """Opened documents by binding, in groups: by all of the binding but its last key
    value (a run's rows of one kind and field), then by that value. Each is kept with the
    ciphertext it opened from (or was sealed to), so an altered or swapped row misses (and
    fails to open). Bounded in bytes: once past, it starts over. A document it holds was
    authenticated from (or sealed to) exactly the ciphertext a hit compares, so a hit is
    what opening that again would give while the key is held: clear it when a key stops
    opening documents."""

    def __init__(self) -> None:
        self.groups: dict[Binding, dict[object, tuple[bytes, bytes]]] = {}
        self.size = 0

    def __len__(self) -> int:
        return sum(map(len, self.groups.values()))

    def get(self, binding: Binding) -> tuple[bytes, bytes] | None:
        """The document kept for `binding`, with its ciphertext."""
        group = self.groups.get(binding[:-1])
        return None if group is None else group.get(binding[-1])

    def keep(self, binding: Binding, stored: bytes, document: bytes) -> None:
        if (cost := len(stored) + len(document) + ENTRY) > OPENED_ENTRY:
            return
        if (group := self.groups.get(head := binding[:-1])) is None:
            group = self.groups[head] = {}
            cost += ENTRY
        group[binding[-1]] = (stored, document)
        self._grew(cost)

    def keep_all(
        self,
        head: Binding,
        items: Sequence[object],
        stored: Sequence[bytes],
        documents: Sequence[bytes],
    ) -> None:
        """Documents under `head`, each by its last key value, with its ciphertext."""
        kept = dict(zip(items, zip(stored, documents, strict=True), strict=True))
        cost = sum(map(len, stored)) + sum(map(len, documents)) + ENTRY * (len(kept) + 1)
        if 2 * max(map(len, stored)) + ENTRY > OPENED_ENTRY:  # some too large to keep
            kept = {i: d for i, d in kept.items() if len(d[0]) + len(d[1]) + ENTRY <= OPENED_ENTRY}
            cost = sum(len(s) + len(d) + ENTRY for s, d in kept.values()) + ENTRY
        if not kept:
            return
        self.groups.setdefault(head, {}).update(kept)
        self._grew(cost)

    def _grew(self, cost: int) -> None:
        self.size += cost
        if self.size > OPENED_BYTES:  # starts over
            self.clear()

    def clear(self) -> None:
        self.groups.clear()
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
_NONE = b"\xff"  # the start of no document
