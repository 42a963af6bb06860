"""Timelines as encoded, kept by run: the bytes of a run's timeline are made once per
revision of the run, and served as they are until the next.

A run whose transcript is all its own (not a fork) has checkpoints only under its own id,
written only by its own `save`, which bumps its `revision`, and never changed after: a
revision names its timeline. (A fork's timeline holds its sources' checkpoints too, which
its revision does not follow: it is made on every request.) Each process keeps its own,
up to a budget of bytes, the least recently served dropped first."""

from __future__ import annotations

from collections import OrderedDict

from runpoint.types import Run

BUDGET = 32 * 2**20


class Timelines:
    def __init__(self, budget: int = BUDGET) -> None:
        self.budget = budget
        self._kept: OrderedDict[str, tuple[int, bytes]] = OrderedDict()  # by run_id
        self._size = 0

    def get(self, run: Run) -> bytes | None:
        kept = self._kept.get(run.run_id)
        if kept is None or kept[0] != run.revision:
            return None
        self._kept.move_to_end(run.run_id)
        return kept[1]

    def keep(self, run: Run, body: bytes) -> None:
        if len(run.segments) != 1 or len(body) > self.budget:
            return
        self._drop(run.run_id)
        self._kept[run.run_id] = (run.revision, body)
        self._size += len(body)
        while self._size > self.budget:
            self._drop(next(iter(self._kept)))

    def _drop(self, run_id: str) -> None:
        if (kept := self._kept.pop(run_id, None)) is not None:
            self._size -= len(kept[1])
