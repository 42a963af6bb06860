"""The storage seam's retention role: what a sweep (runpoint.durable.retention) removes.

Forks are copy-on-write (see `Segment`): a run reads rows stored under other runs' ids,
and a READY session checkpoint's capture reads the rows of the runs it captured. Removing
a run therefore removes its run row, its event log and its tool-call records, but of its
messages and checkpoints only those that nothing left reads: a surviving reader answers
byte for byte as before, and the rows it reads go with the last reader.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol

import msgspec

from runpoint.core.types import Run, RunStatus

FINISHED = (RunStatus.COMPLETED, RunStatus.ERROR, RunStatus.CANCELLED)


class Removed(msgspec.Struct, kw_only=True):
    """What a removal took (or, in a dry run, would take): rows by kind, and the bytes of
    their documents."""

    runs: int = 0
    sessions: int = 0
    messages: int = 0
    checkpoints: int = 0
    events: int = 0
    size: int = 0  # bytes
    run_ids: list[str] = []

    def __add__(self, other: Removed) -> Removed:
        counts = {
            f: getattr(self, f) + getattr(other, f)
            for f in self.__struct_fields__
            if f != "run_ids"
        }
        return Removed(**counts, run_ids=self.run_ids + other.run_ids)


class RetentionStore(Protocol):
    """Bounded reads of what may go, and removals that respect lineage. Each removal is
    one transaction (a removal killed midway removes nothing); with `dry_run` it writes
    nothing and says what it would have removed."""

    async def finished_runs(self, after: int, limit: int) -> tuple[list[Run], int]:
        """Finished runs (COMPLETED, ERROR, CANCELLED), hidden or not, in insertion order
        from just past the position `after` (0: from the first), `limit` at most; and the
        position to read on from (0 once the last run was read)."""

    async def remove_runs(self, run_ids: Sequence[str], *, dry_run: bool = False) -> Removed:
        """Delete those of these runs that are finished and that no run left in their
        session follows (its `previous_run_id`: a later run reads them as history), with
        their event logs and tool-call records, and the messages and checkpoints that no
        run left nor a session checkpoint reads; then the sessions of these runs that have
        no run left, with their session checkpoints. Other ids are left alone."""

    async def trim_checkpoints(self, run_id: str, keep: int, *, dry_run: bool = False) -> Removed:
        """Delete the checkpoints of a finished run but its last `keep`, its end, and
        those another run or a session checkpoint reads; nothing if it is not finished."""

    async def drop_events(self, run_ids: Sequence[str], *, dry_run: bool = False) -> Removed:
        """Delete the event logs of those of these runs that are finished."""


def removable(runs: Sequence[Run], wanted: Collection[str]) -> set[str]:
    """Of the runs `wanted`, those a removal takes, given all the runs of their sessions
    (hidden ones included): the finished ones that no run left follows."""
    doomed = {r.run_id for r in runs if r.run_id in wanted and r.status in FINISHED}
    while followed := doomed & {r.previous_run_id for r in runs if r.run_id not in doomed}:
        doomed -= followed
    return doomed
