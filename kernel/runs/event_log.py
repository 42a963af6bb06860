"""An execution's events on their way to its run's event log.

Each event takes the next `seq` as it comes, and nobody sees it before it is stored: a
stream reads the log, so an id once sent is the same event for every reader in every
process, even if this process dies the next moment. Events are written as soon as they
come, in batches: those that came while the last write was going go together (a group
commit), so a burst of text deltas costs a few writes, and a lone event one. A boundary
(`writing`) takes the waiting events into its own transaction: the events that say a run
stopped are stored with the status that says so.

An event of a run nobody follows in this process waits for company up to `LINGER`, the
interval at which a follower elsewhere looks at the log anyway: a model turn shorter than
that costs one write (its boundary's) rather than three, and such a follower sees its
events at most one look later. A follower here gets each event as soon as it comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial

from runpoint.core.types import Run, RunEvent
from runpoint.durable.outages import Outlast
from runpoint.reads.streams import PAGE
from runpoint.seams.crew import MEMBER
from runpoint.seams.storage import Storage

log = logging.getLogger("runpoint.events")
LINGER = 0.05  # seconds; a follower in another process looks again every 0.05 s


class EventLog:
    def __init__(
        self,
        storage: Storage,
        run: Run,
        last_seq: int,
        stored: Callable[[], None],
        outlast: Outlast,
        followed: Callable[[], bool] = lambda: True,
    ) -> None:
        """The events of `run` (the execution's own `Run`, whose revision its writes
        follow) from `last_seq` + 1 on; `stored` is called after each write, and each is
        retried through an outage by `outlast`; `followed` says whether a follower in this
        process waits for them (if not, they linger)."""
        self.storage = storage
        self.outlast = outlast
        self.run = run
        self.last_seq = last_seq  # the last seq given
        self._stored = stored
        self._waiting: list[RunEvent] = []
        # one write at a time, boundaries included: each goes at the run's revision
        self._writing = asyncio.Lock()
        self._flush: asyncio.Task[None] | None = None
        self._followed = followed
        self._company = asyncio.Event()  # a boundary took the waiting events, or the end
        self._taken = 0  # boundaries that took waiting events
        self._closing = False
        # a member run's: its crew run's log, given each of its events once it is stored
        self.relay: EventLog | None = None
        # a crew run's: by member run, how many of its events this log held when first
        # read, and the last one's seq (see `catch_up`)
        self._relayed: dict[str, tuple[int, int | None]] | None = None
        self._reading = asyncio.Lock()

    def add(self, event: RunEvent) -> None:
        self.last_seq += 1
        event.seq = self.last_seq
        self._waiting.append(event)
        if self._flush is None:
            self._flush = asyncio.create_task(self._write_waiting(), name="event log")

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[list[RunEvent]]:
        """The events waiting, for a boundary that writes them: announced if it succeeds,
        dropped if it fails (nobody saw them; they told of a write that did not happen)."""
        async with self._writing:
            events, self._waiting = self._waiting, []
            self._taken += 1
            self._company.set()
            yield events
        if events:
            self._announce(events)

    def followed(self) -> bool:
        """Whether a follower in this process waits for these events (or, for a member
        run's, for its crew run's)."""
        return self._followed() or (self.relay is not None and self.relay.followed())

    def add_member_events(self, events: Sequence[RunEvent]) -> None:
        """A member run's stored events, added to this (its crew run's) log: the team
        run's stream carries them, in the order they were stored, each under a seq of
        this log, told from the crew run's own by `MEMBER` (its member, member run and
        seq there)."""
        run = self.run
        for e in events:
            member = {"agent_id": e.agent_id, "run_id": e.run_id, "seq": e.seq}
            data = e.data | {MEMBER: member}
            self.add(
                RunEvent(e.event, run.run_id, run.session_id, run.agent_id, e.created_at, data)
            )

    async def catch_up(self, member: Run) -> None:
        """Add the member run's stored events that this (its crew run's) log lacks: those
        stored just before a process died, whose relay (in memory) died with it. What was
        relayed is read off this log once per execution (which delegates to each member
        once, and catches it up before its execution here), so every stored event is
        relayed once, in order, whichever process resumes the member."""
        async with self._reading:
            if self._relayed is None:
                self._relayed = {}
                for e in await self._read_all(self.run):
                    if (told := e.data.get(MEMBER)) is not None:
                        count, _ = self._relayed.get(told["run_id"], (0, 0))
                        self._relayed[told["run_id"]] = (count + 1, told.get("seq"))
        count, last = self._relayed.get(member.run_id, (0, 0))
        if last is None:  # relayed before their `seq` was kept: the first `count`, in order
            self.add_member_events((await self._read_all(member))[count:])
        else:
            self.add_member_events(await self._read_all(member, last))

    async def _read_all(self, run: Run, after: int = 0) -> list[RunEvent]:
        events: list[RunEvent] = []
        while page := await self.outlast(partial(self.storage.read_events, run, after, PAGE)):
            events += page
            after = page[-1].seq
        return events

    def _announce(self, events: Sequence[RunEvent]) -> None:
        self._stored()
        if self.relay is not None:
            self.relay.add_member_events(events)

    def hurry(self) -> None:
        """A follower here came: what waits is written now, and what comes, as it comes."""
        self._company.set()

    async def close(self) -> None:
        """Write what waits (the execution is over)."""
        self._closing = True
        self._company.set()
        while (flush := self._flush) is not None:
            await flush

    async def _write_waiting(self) -> None:
        try:
            while self._waiting:
                if not self._closing and not self.followed():
                    taken = self._taken
                    self._company.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._company.wait(), LINGER)
                    if self._taken != taken:
                        continue  # a boundary took them: those that came since wait anew
                async with self._writing:
                    events, self._waiting = self._waiting, []
                    if not events:
                        continue
                    written = await self._append(events)
                if written:
                    self._announce(events)
                # else: another writer took the run over; this execution's next save fails
        finally:
            self._flush = None

    async def _append(self, events: list[RunEvent]) -> bool:
        """Append between boundaries; a failure costs these events (the run goes on: its
        next boundary either writes, or fails the execution), never the run."""
        try:
            return await self.outlast(lambda: self.storage.append_events(self.run, events))
        except Exception:
            first, last = events[0].seq, events[-1].seq
            log.exception("events %d-%d of run %s were lost", first, last, self.run.run_id)
            return False
