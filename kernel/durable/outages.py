"""Outages: the storage's failures that are its state, not the request's (its database
down or restarting, its disk full), told apart, counted, and outlasted.

A client is told to come back (503, or 507 for a full disk, with Retry-After). A write a
process makes for a run it holds (a boundary, a tool call's result, events) is retried
until it gets through or the run's lease runs out: a database back within the lease
finds the run where it was, with no executed call in doubt. Past the lease the run is
another process's to resume, so the write is given up.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar

from runpoint.core.cancels import stop_if_cancelled
from runpoint.core.errors import StorageFull, Unavailable
from runpoint.core.types import Run, now
from runpoint.durable.leases import Leases
from runpoint.seams.storage import Diagnosed, Storage

log = logging.getLogger("runpoint.outages")

T = TypeVar("T")
FIRST_PAUSE = 0.1  # seconds before the first retry, doubled up to LAST_PAUSE
LAST_PAUSE = 1.0


class Outages:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.counts: Counter[str] = Counter()  # failures met, by kind: "full", "unavailable"

    def of(self, exc: BaseException, *, counted: bool = True) -> Unavailable | None:
        """`exc` as the outage it is, or None if it is not one; `counted`: a failure of a
        request or a write (not of a readiness probe)."""
        if isinstance(exc, Unavailable):
            found: Unavailable | None = exc
        elif isinstance(self.storage, Diagnosed):
            found = self.storage.outage(exc)
        else:
            found = None
        if found is not None and counted:
            self.counts["full" if isinstance(found, StorageFull) else "unavailable"] += 1
        return found

    async def outlasted(self, write: Callable[[], Awaitable[T]], until: float) -> T:
        """`write`, retried while it fails for an outage and the wall clock is before
        `until` (a lease's end); its last failure raised as an outage."""
        pause = FIRST_PAUSE
        while True:
            try:
                return await write()
            except Exception as exc:
                stop_if_cancelled(exc)  # no retry for a task asked to stop
                if (outage := self.of(exc)) is None:
                    raise
                if now() + pause >= until:
                    log.warning("a write failed (%s); given up: the lease ends", outage)
                    raise outage from exc
                if pause == FIRST_PAUSE:  # once a write, not at every attempt
                    log.warning("a write failed (%s); retrying", outage)
            await asyncio.sleep(pause)
            pause = min(pause * 2, LAST_PAUSE)


class Outlast:
    """The writes of a run this process executes, each retried through an outage until
    they get through or the run's lease ends (this process holds it no longer)."""

    def __init__(self, outages: Outages, leases: Leases, run: Run) -> None:
        self.outages = outages
        self.leases = leases
        self.run = run

    async def __call__(self, write: Callable[[], Awaitable[T]], until: float | None = None) -> T:
        """`write`, retried until `until` if given (the lease as it was before a write
        that renews it), else until the run's lease as stored ends."""
        held = self.leases.held_until(self.run) if until is None else until
        return await self.outages.outlasted(write, held)
