"""Following runs' event logs: a run's stored events from a point, then the live ones until
the run stops (or pauses), in any process.

The followers of one run in a process share one tail: one reader of the log that keeps the
newest events for them, woken at once by this process's executions as they store events
(see `runpoint.runs.event_log`), else looking again every `poll_seconds`. A follower whose
point is before what the tail keeps reads the log itself until it catches up. So a hundred
followers of a run cost what one does, but for sending.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

from runpoint.core.types import IN_FLIGHT, Run, RunEvent
from runpoint.seams.storage import Storage

log = logging.getLogger("runpoint.streams")
PAGE = 500  # events read at a time
KEPT = 2_000  # the newest events a tail keeps for its followers
# the events stored with a status a follow ends at (runpoint.runs.execution)
STOPPING = frozenset({"RunCompleted", "RunError", "RunCancelled", "RunPaused"})


class _Tail:
    """The newest events of a run, read once for all its followers in this process."""

    def __init__(self, storage: Storage, run: Run, after: int, poll_seconds: float) -> None:
        self.storage = storage
        self.run = run
        self.poll_seconds = poll_seconds
        self.base = after  # `events` are those stored after this seq
        self.events: list[RunEvent] = []
        self.stopped = False  # the run stopped with `events` its last
        self.followers = 0
        self.changed = asyncio.Condition()
        self.woken = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def last(self) -> int:
        return self.events[-1].seq if self.events else self.base

    def after(self, seq: int) -> list[RunEvent] | None:
        """The kept events past `seq`; None if some of them are before what is kept."""
        if seq < self.base:
            return None
        return self.events[bisect.bisect_right(self.events, seq, key=lambda e: e.seq) :]

    async def read(self) -> None:
        """Read the log until the run stops."""
        while True:
            if found := await self.storage.read_events(self.run, self.last, PAGE):
                await self._keep(found)
                if len(found) == PAGE:
                    continue
                # a short page is the log's end: what is stored after it wakes the tail
            # the status, unless the events just read go on: the events that say a run
            # stopped are stored with its status (one that stopped otherwise, or went,
            # is seen at the next look that finds nothing new)
            if not found or found[-1].event in STOPPING:
                run = await self.storage.get_run(self.run.run_id)
                if run is None or run.status not in IN_FLIGHT:
                    while found := await self.storage.read_events(self.run, self.last, PAGE):
                        await self._keep(found)
                    return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.woken.wait(), self.poll_seconds)
            self.woken.clear()

    async def stop(self) -> None:
        async with self.changed:
            self.stopped = True
            self.changed.notify_all()

    async def _keep(self, found: list[RunEvent]) -> None:
        async with self.changed:
            self.events += found
            if len(self.events) > KEPT:
                dropped = len(self.events) - KEPT
                self.base = self.events[dropped - 1].seq
                del self.events[:dropped]
            self.changed.notify_all()


class Streams:
    """This process's followers of runs' event logs."""

    def __init__(
        self, storage: Storage, poll_seconds: float, joined: Callable[[str], None]
    ) -> None:
        """`joined(run_id)` is told of each run's first follower here."""
        self.storage = storage
        self.poll_seconds = poll_seconds
        self._joined = joined
        self._tails: dict[str, _Tail] = {}

    def following(self, run_id: str) -> bool:
        """Whether the run has followers in this process."""
        return run_id in self._tails

    def stored(self, run_id: str) -> None:
        """Events of the run were stored here: its followers read them now."""
        if (tail := self._tails.get(run_id)) is not None:
            tail.woken.set()

    async def follow(
        self, run: Run, after: int = 0, *, stored: bool = False
    ) -> AsyncIterator[list[RunEvent]]:
        """The run's events whose seq is past `after`, stored ones first, then the live ones
        until the run stops (or pauses); in batches, as they came (a stream sends a batch
        at once: a hundred followers of a fast run cost a send per batch, not per token).
        `stored`: the log is known to hold `after` (its end is not read)."""
        tail = await self._join(run, after, stored)
        try:
            seq = after
            while True:
                found = tail.after(seq)
                if found is None:  # behind what the tail keeps: from the log
                    found = await self.storage.read_events(run, seq, PAGE)
                if found:
                    yield found
                    seq = found[-1].seq
                    continue
                async with tail.changed:
                    if tail.stopped and seq >= tail.last:
                        return
                    if seq >= tail.last:
                        await tail.changed.wait()
        finally:
            self._leave(tail)

    async def _join(self, run: Run, after: int, stored: bool) -> _Tail:
        tail = self._tails.get(run.run_id)
        if tail is None:
            # a tail starts where its first follower is, but never past the log's end (an
            # id a client made up): its followers read what is before it from the log
            end = after if stored else await self.storage.last_event_seq(run.run_id)
            tail = self._tails.get(run.run_id)  # another follower's, made meanwhile
            if tail is None:
                tail = _Tail(self.storage, run, min(after, end), self.poll_seconds)
                self._tails[run.run_id] = tail
                tail.task = asyncio.create_task(self._read(tail), name=f"tail {run.run_id}")
                self._joined(run.run_id)
        tail.followers += 1
        return tail

    async def _read(self, tail: _Tail) -> None:
        """Read the tail until its run stops; its followers end then (and if the log cannot
        be read: a client resumes from the last event it had)."""
        try:
            await tail.read()
        except Exception:
            log.exception("the event log of run %s could not be read", tail.run.run_id)
        finally:
            self._forget(tail)  # a stopped run's next execution (a continue) is a new tail's
            await tail.stop()

    def _leave(self, tail: _Tail) -> None:
        tail.followers -= 1
        if tail.followers == 0 and tail.task is not None:
            self._forget(tail)
            tail.task.cancel()

    def _forget(self, tail: _Tail) -> None:
        if self._tails.get(tail.run.run_id) is tail:
            del self._tails[tail.run.run_id]
