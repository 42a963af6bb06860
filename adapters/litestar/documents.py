"""Read documents as encoded, kept by run: the bytes of a run's timeline, of the run with
its transcript (get-run) and of its snapshot at a boundary are made once per state of the
run, and served as they are until it changes.

A run whose transcript is all its own (not a fork) has messages and checkpoints only under
its own id, written only by its own `save`, which bumps its `revision`, and never changed
after; all else these documents say is the run's row (which a cancel from another process
changes without a new revision). So the run as read with the request names each document:
one is served while the run reads back exactly as it was when the document was made. (A
fork's documents hold its sources' messages and checkpoints, which its row does not follow:
they are made on every request.) Each app keeps its own (`app.build` makes it, handlers
name it), up to a budget of bytes, the least recently served dropped first. The budget
counts all an entry holds: the document, the run's state kept to check it, and the key
and bookkeeping around them."""

from __future__ import annotations

from collections import OrderedDict

import msgspec

from runpoint.core.types import Run

# enough for the documents of the runs being polled and read now (a few KB each), and a
# fixed share of a process's memory however many runs it has served (docs/operations.md)
BUDGET = 16 * 2**20
# bytes an entry holds besides its state and document: its key, the tuples, the dict's
# slot and the objects' headers (about 400 on CPython 3.11; rounded up)
ENTRY = 512

# the operation, the run's id, and what else the request names (a snapshot's index)
Key = tuple[str, str, int]

_state = msgspec.json.Encoder().encode


class Documents:
    def __init__(self, budget: int = BUDGET) -> None:
        self.budget = budget
        # by key: the state of the run it was made for (its row, encoded), and its bytes
        self._kept: OrderedDict[Key, tuple[bytes, bytes]] = OrderedDict()
        self._size = 0

    def get(self, key: Key, run: Run) -> bytes | None:
        kept = self._kept.get(key)
        if kept is None or kept[0] != _state(run):
            return None
        self._kept.move_to_end(key)
        return kept[1]

    def keep(self, key: Key, run: Run, body: bytes) -> None:
        state = _state(run)
        if len(run.segments) != 1 or _cost(state, body) > self.budget:
            return
        self._drop(key)
        self._kept[key] = (state, body)
        self._size += _cost(state, body)
        while self._size > self.budget:
            self._drop(next(iter(self._kept)))

    @property
    def size(self) -> int:
        """The bytes held, as counted against the budget."""
        return self._size

    def _drop(self, key: Key) -> None:
        if (kept := self._kept.pop(key, None)) is not None:
            self._size -= _cost(*kept)


def _cost(state: bytes, body: bytes) -> int:
    return len(state) + len(body) + ENTRY
