"""Encryption at rest in the SQL backend: the documents a user, a tool or a model wrote are
sealed by the keyring (runpoint.core.keyring) as they are encoded, and opened as they are
decoded; ids, statuses, timestamps and counts stay in their columns, in the clear.

Each sealed column is named here with the key of its row (`SEALED`): the associated data
of a ciphertext is its table, column and row key, the row's own (a fork reads its
source's rows under the source's run id), so a ciphertext copied onto another row fails.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, TypeVar

from runpoint.core.errors import Unreadable
from runpoint.core.keyring import MAGIC, TEAM_MAGIC, Keyring, TeamKeys, Unopened, key_id_of
from runpoint.plugins.sql.schema import (
    approvals,
    checkpoints,
    messages,
    run_events,
    runs,
    schedules,
    session_checkpoints,
    tool_calls,
)

log = logging.getLogger("runpoint.encryption")
Row = TypeVar("Row")
Decoded = TypeVar("Decoded")

# the `secrets` row that says `runpoint db encrypt` is under way: rows in the clear are
# read as such only then
UNDER_WAY = "encryption-under-way"


class SealedColumns(NamedTuple):
    table: str
    key: tuple[str, ...]  # the row's primary key
    columns: tuple[str, ...]


SEALED = (
    SealedColumns(runs.name, ("run_id",), ("data", "state")),
    SealedColumns(messages.name, ("run_id", "idx"), ("data",)),
    SealedColumns(checkpoints.name, ("run_id", "message_index"), ("data",)),
    SealedColumns(run_events.name, ("run_id", "seq"), ("data",)),
    SealedColumns(tool_calls.name, ("run_id", "tool_call_id"), ("result",)),
    SealedColumns(session_checkpoints.name, ("checkpoint_id",), ("capture",)),
    SealedColumns(approvals.name, ("id",), ("data",)),  # the paused calls' arguments
    SealedColumns(schedules.name, ("schedule_id",), ("data",)),  # the message of its runs
)
_KEY_LENGTH = {s.table: len(s.key) for s in SEALED}

# The opened documents a codec keeps (`Codec.open_rows`), each counted as its bytes, its
# ciphertext's and ENTRY's (the key, the tuples, the dict's slot, the objects' headers:
# about 350 on CPython 3.11): up to OPENED_ENTRY each, OPENED_BYTES in all.
OPENED_ENTRY = 64 * 1024
OPENED_BYTES = 32 * 1024 * 1024
ENTRY = 400


def aad(table: str, column: str, key: tuple[object, ...]) -> bytes:
    return "\x00".join((table, column, *map(str, key))).encode()


class Codec:
    """Seals and opens one database's documents; without a keyring, keeps them as they are
    (and refuses the sealed ones: they need the keyring)."""

    def __init__(self, keyring: Keyring | None = None) -> None:
        self.keyring = keyring
        # each team's documents are sealed under its own key (see plugins/sql/team_keys.py)
        self.teams = None if keyring is None else TeamKeys(keyring)
        self.clear_ok = False  # `runpoint db encrypt` is under way: rows in the clear serve
        self.failures = 0  # rows refused since start (see /metrics)
        self.opened = Opened()

    def open_rows(self, table: str, column: str, rows: Iterable[Sequence[Any]]) -> list[bytes]:
        """The documents of rows that each start with their key (as `SEALED` names it for
        `table`), then the stored document: as `open` gives them, but those opened from
        the very same ciphertext on the same row before are not opened again. A transcript
        is read whole, often (its checkpoints at each timeline read, a fork its source's
        rows too), and one AES-GCM open costs more than decoding a small row."""
        n = _KEY_LENGTH[table]
        if self.keyring is None:
            return [self.open(row[n], table, column, *row[:n]) for row in rows]
        kept = self.opened.get
        return [
            hit[1]
            if (hit := kept(key := (table, column, *row[:n]))) is not None and hit[0] == row[n]
            else self._open_kept(row[n], key)
            for row in rows
        ]

    def _open_kept(self, stored: bytes, key: tuple[Any, ...]) -> bytes:
        document = self.open(stored, *key)
        if document is not stored:  # opened, not a row in the clear let through
            self.opened.keep(key, stored, document)  # in place of the row's last, if any
        return document

    def seal(self, document: bytes, table: str, column: str, *key: object, team: str) -> bytes:
        if self.teams is None:
            return document
        return self.teams.seal(team, document, aad(table, column, key))

    def open(self, stored: bytes, table: str, column: str, *key: object) -> bytes:
        if self.keyring is None or self.teams is None:
            if stored[:1] in _SEALED:
                raise self._refused(table, key, column, "sealed, and no keyring was given")
            return stored
        if self.clear_ok and stored[:1] not in _SEALED:
            return stored
        try:
            if stored[:1] == _TEAM_SEALED:
                return self.teams.open(stored, aad(table, column, key))
            return self.keyring.open(stored, aad(table, column, key))
        except Unopened as exc:
            raise self._refused(table, key, column, str(exc)) from None

    def _refused(self, table: str, key: tuple[object, ...], column: str, why: str) -> Unreadable:
        self.failures += 1
        row = f"{table}({', '.join(map(str, key))}).{column}"
        log.error("stored row %s cannot be read: %s", row, why)
        return Unreadable(row, why)


class Opened(dict[tuple[object, ...], tuple[bytes, bytes]]):
    """Opened documents by (table, column, *row key): each with the ciphertext it opened
    from, so an altered or swapped row misses (and fails to open). Bounded in bytes: once
    full, it starts over. A document it holds was authenticated from exactly the
    ciphertext a hit compares, so a hit is what opening that again would give while the
    key that opened it is held: clear it when a key stops opening documents."""

    size = 0

    def keep(self, key: tuple[object, ...], stored: bytes, document: bytes) -> None:
        cost = len(stored) + len(document) + ENTRY
        if cost > OPENED_ENTRY:
            return
        if self.size + cost > OPENED_BYTES:
            self.clear()
        self[key] = (stored, document)
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
__all__ = ["SEALED", "UNDER_WAY", "Codec", "aad", "key_id_of", "readable"]
