"""The storage seam's retention role: what a sweep (runpoint.durable.retention) removes.

Forks are copy-on-write (see `Segment`): a run reads rows stored under other runs' ids,
and a READY session checkpoint's capture reads the rows of the runs it captured. Removing
a run therefore removes its run row, its event log and its tool-call records, but of its
messages and checkpoints only those that nothing left reads: a surviving reader answers
byte for byte as before, and the rows it reads go with the last reader.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, fields, replace
from typing import Protocol

import msgspec

from runpoint.core.types import Run, RunStatus

FINISHED = (RunStatus.COMPLETED, RunStatus.ERROR, RunStatus.CANCELLED)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
NEVER = ("never", "forever", "off")


def duration(text: str, what: str = "a duration") -> float:
    """Seconds from `30d`, `12h`, `90m`, `45s`, `2w` or a number of seconds; `never`:
    infinity. ValueError, saying what was expected, if it cannot be read."""
    spoken = text.strip().lower()
    if spoken in NEVER:
        return math.inf
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw]?)", spoken)
    if found is None:
        raise ValueError(f"{what}: {text!r} is not a duration (30d, 12h, 90m, 45s or never)")
    return float(found[1]) * _UNITS[found[2] or "s"]


def count(text: str, what: str = "a count") -> float:
    """A count of at least 0 from its digits; `all`: infinity (keep every one)."""
    spoken = text.strip().lower()
    if spoken == "all":
        return math.inf
    if not spoken.isdigit():
        raise ValueError(f"{what}: {text!r} is not a count (0, 1, 2, ... or all)")
    return int(spoken)


@dataclass(frozen=True)
class Retention:
    """How long finished runs keep what: a server's policy, or an agent's fields over it
    (None: as the server; `math.inf`: forever). `runs`: seconds after a run finished
    that it is removed; `checkpoints`: how many of a finished run's last checkpoints it
    keeps (its end always); `events`: seconds after a run finished that its event log
    goes."""

    runs: float | None = None
    checkpoints: float | None = None
    events: float | None = None

    @classmethod
    def of(
        cls, runs: str | None = None, checkpoints: str | None = None, events: str | None = None
    ) -> Retention:
        """From their text (`runs="30d"`, `checkpoints="5"`): ValueError if one is bad."""
        return cls(
            runs=None if runs is None else duration(runs, "runs"),
            checkpoints=None if checkpoints is None else count(checkpoints, "checkpoints"),
            events=None if events is None else duration(events, "events"),
        )

    def over(self, server: Retention) -> Retention:
        """This policy's fields where they are set, the server's where not."""
        set_here = {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}
        return replace(server, **set_here)

    @property
    def removes(self) -> bool:
        """Whether it removes anything at all."""
        return any(
            v is not None and v != math.inf for v in (self.runs, self.checkpoints, self.events)
        )


# what a removal counts, by kind (metrics and spans say each)
RETAINED = ("runs", "sessions", "messages", "checkpoints", "events", "keys")


class Removed(msgspec.Struct, kw_only=True):
    """What a removal took (or, in a dry run, would take): rows by kind, and the bytes of
    their documents."""

    runs: int = 0
    sessions: int = 0
    messages: int = 0
    checkpoints: int = 0
    events: int = 0
    keys: int = 0  # answered Idempotency-Keys past their time
    size: int = 0  # bytes
    reclaimed: int = 0  # bytes of the database's files returned to the file system
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

    @property
    def removals_per_transaction(self) -> int:
        """Runs a sweep's removal takes at most: few where a write transaction holds up
        every other writer (SQLite's one lock), more where it holds only the rows it
        removes, which nobody writes (PostgreSQL): each transaction costs round trips."""

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

    async def reclaim_space(self, pages: int) -> int:
        """Return space that removals freed to the file system, `pages` (of the database's
        own size) at most: the bytes returned (0 where the database does that itself)."""


def removable(runs: Sequence[Run], wanted: Collection[str]) -> set[str]:
    """Of the runs `wanted`, those a removal takes, given all the runs of their sessions
    (hidden ones included): the finished ones that no run left follows."""
    doomed = {r.run_id for r in runs if r.run_id in wanted and r.status in FINISHED}
    while followed := doomed & {r.previous_run_id for r in runs if r.run_id not in doomed}:
        doomed -= followed
    return doomed
