"""The schedule loop: in every server process, firing each due tick exactly once across
processes, and settling the runs fired (retries, timeouts).

Every `every` seconds a process takes the schedules whose `next_run_at` has come, a batch
at a time, each held for a while (`hold`, a lease's length) so that processes share a
minute's ticks rather than each working through all of them, and goes through each one's
ticks that passed, in order: a current tick (one at most `GRACE_SECONDS`
late) fires; ticks later than that were missed while no server ran, and fire nothing under
the schedule's `missed="skip"`, and one run, at the latest of them, under `"run_once"`.

A tick fires through the ordinary create path with the Idempotency-Key "schedule <id>
<tick>" (`fire`, given by `runpoint.runs.schedules`): its claim is a lease, and the write
that makes the run answers it in the same transaction (`runpoint.durable.idempotency`).
So two processes that race for a tick make one run, the loser gets that run back, and a
process that dies after claiming and before its run is written leaves a claim that runs
out for the next process to take over, never a tick fired twice or by nobody. Then the
run is recorded (once per tick), and the schedule moves on to its next tick by
compare-and-set from the tick it read: each step is safe to repeat after a crash. A tick
found late (no process moved the schedule on for longer than the grace) is checked
against those records before it fires again: its key may have gone with the retention
sweep (answered keys are kept a bounded time). The hold only spares work: a process
that dies holding a batch leaves it to the others once the hold runs out.

Then the pass settles what was fired, reading only the records whose run ended or whose
attempt ran out of time (`deadline`), not every run in flight on every pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from runpoint.core.schedule import GRACE_SECONDS, Schedule, ScheduleRun
from runpoint.core.types import now
from runpoint.durable.periodic import Periodic
from runpoint.seams.host import PluginHost
from runpoint.seams.storage import Storage

log = logging.getLogger("runpoint.schedules")
SCHEDULE_SECONDS = 1.0  # between passes of the loop
SCHEDULE_BATCH = 500  # unsettled runs a pass reads at most
AT_ONCE = 8  # schedules a pass fires (or runs it settles) at the same time
TAKEN = 4 * AT_ONCE  # due schedules a pass takes at a time (and the others the rest)
MAX_MISSED = 100_000  # ticks counted at most when a schedule catches up

# fire a tick: its record, and whether this call fired it (not another process)
Fire = Callable[[Schedule, float], Awaitable[tuple[ScheduleRun, bool]]]
Settle = Callable[[ScheduleRun], Awaitable[None]]


class Scheduler(Periodic):
    name, log = "schedule pass", log

    def __init__(
        self,
        storage: Storage,
        host: PluginHost,
        fire: Fire,
        settle: Settle,
        *,
        every: float = SCHEDULE_SECONDS,
        hold: float = 30.0,
        batch: int = SCHEDULE_BATCH,
        clock: Callable[[], float] = now,
    ) -> None:
        self.storage = storage
        self.host = host
        self.fire = fire
        self.settle = settle
        self.every = every
        self.hold = hold
        self.batch = batch
        self.clock = clock  # tests drive a fast one

    async def run_due(self) -> int:
        """One pass: fire what is due, then settle the runs fired; the ticks fired."""
        at = self.clock()
        going = asyncio.Semaphore(AT_ONCE)

        async def due_one(schedule: Schedule) -> int:
            async with going:
                try:
                    return await self._due(schedule, at)
                except Exception:  # one schedule's failure (an outage) leaves the others
                    log.exception("firing schedule %s failed", schedule.schedule_id)
                    return 0

        async def settle_one(record: ScheduleRun) -> None:
            async with going:
                try:
                    await self.settle(record)
                except Exception:
                    log.exception("settling run %s of a schedule failed", record.run_id)

        fired = 0
        while due := await self.storage.claim_due(at, TAKEN, at + self.hold):
            fired += sum(await asyncio.gather(*map(due_one, due)))
        await self.storage.settle_done()  # in one statement: most runs just completed
        unsettled = await self.storage.unsettled_fired(at, self.batch)
        await asyncio.gather(*map(settle_one, unsettled))
        return fired

    async def _due(self, schedule: Schedule, at: float) -> int:
        """Fire the schedule's ticks that passed by `at`, each once, in order: each is
        fired and moved past (compare-and-set), until one is yet to come."""
        fired = 0
        tick = schedule.next_run_at
        while tick is not None and tick <= at:
            fire: float | None
            if at - tick <= GRACE_SECONDS:  # a current tick (late at most the grace)
                fire, after, missed = tick, tick, 0
            else:  # missed while no server ran: those ticks up to the grace, together
                after, missed = tick, 1
                while missed < MAX_MISSED and (n := schedule.next_tick(after)) is not None:
                    if at - n <= GRACE_SECONDS:
                        break
                    after, missed = n, missed + 1
                fire = after if schedule.missed == "run_once" else None
                if fire == tick and await self._recorded(schedule, tick):
                    # fired before its process died, maybe longer ago than keys are kept
                    fire, missed = None, missed - 1
                missed -= fire is not None
            if fire is not None:
                record, made = await self.fire(schedule, fire)
                fired += 1
                if made:
                    delay = max(0.0, self.clock() - fire)
                    self.host.hook.runpoint_schedule_fired(
                        schedule=schedule, fired=record, delay=delay
                    )
            following = schedule.next_tick(after)
            if not await self.storage.advance_schedule(schedule.schedule_id, tick, following):
                break  # another process moved it on (and counts what it missed)
            if missed:
                log.info("schedule %s missed %d ticks", schedule.schedule_id, missed)
                self.host.hook.runpoint_schedule_missed(schedule=schedule, ticks=missed)
            tick = following
        return fired

    async def _recorded(self, schedule: Schedule, tick: float) -> bool:
        """Whether the tick's run was recorded (among the schedule's last records)."""
        last = await self.storage.list_fired(schedule.schedule_id, limit=10, offset=0)
        return any(r.tick == tick and r.trigger == "cron" for r in last)

    async def once(self) -> int:
        return await self.run_due()
