"""Leases: how a run survives its process.

A process executing a run holds a lease on it, renewed as the run goes and by a heartbeat
in between (a run waiting in the run queue holds an unowned one: see `Leases.offer`). A
run whose lease ran out lost its process (SIGKILL, power loss): the sweeper of any
process that knows the run's agent claims it (one winner, by the run's revision) and
resumes it from its last durable boundary, up to `max_recoveries` times; after that the
run ends ERROR with the reason.

A session operation that goes on over several writes (a rollback, a checkpoint's capture)
holds a `Lease` of its own, renewed by `renewing` while it goes; the next request that meets
it after the lease ran out completes it or ends it (see `runpoint.sessions.lifecycle` and
`runpoint.sessions.checkpoints`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection

from runpoint.core.cancels import stop_if_cancelled, stopped
from runpoint.core.errors import Conflict
from runpoint.core.types import Lease, Run, RunEvent, RunStatus, new_id, now
from runpoint.seams.storage import Storage

log = logging.getLogger("runpoint.recovery")


class Leases:
    def __init__(
        self,
        storage: Storage,
        *,
        lease_seconds: float,
        max_recoveries: int,
    ) -> None:
        self.storage = storage
        self.owner = new_id()
        self.lease_seconds = lease_seconds
        self.max_recoveries = max_recoveries
        self.renewed_until = 0.0  # the end of the leases the watch last renewed

    def held_until(self, run: Run) -> float:
        """Until when this process holds a run it executes, as stored: the lease its last
        write took, or the watch's last renewal if later."""
        return max(run.lease_expires_at or 0.0, self.renewed_until)

    def stamp(self, run: Run) -> None:
        """Take (or renew) the lease of a run this process executes; drop it when the
        run is no longer RUNNING."""
        if run.status in (RunStatus.RUNNING, RunStatus.PENDING):
            run.lease_to(self.owner, now() + self.lease_seconds)
        else:
            run.lease_to(None, None)

    def offer(self, run: Run) -> None:
        """Leave a PENDING run to the run queue: it is nobody's until a process claims it,
        and if none has within `lease_seconds`, the lease watch of any process takes it."""
        run.lease_to(None, now() + self.lease_seconds)

    def is_held_elsewhere(self, run: Run) -> bool:
        """Whether another live process executes this run."""
        return (
            run.status in (RunStatus.RUNNING, RunStatus.PENDING)
            and run.lease_owner not in (None, self.owner)
            and (run.lease_expires_at or 0) > now()
        )

    def lease(self, owner: str | None = None) -> Lease:
        """A lease of `lease_seconds` from now for a session operation: a new one (its own
        owner, which no other operation, here or elsewhere, passes for), or `owner`'s."""
        return Lease(owner or new_id(), now() + self.lease_seconds)

    @contextlib.asynccontextmanager
    async def renewing(
        self, owner: str, renew: Callable[[Lease], Awaitable[object]]
    ) -> AsyncIterator[None]:
        """Renew `owner`'s lease (`renew` writes it) every third of its term while the
        block runs."""

        async def heartbeat() -> None:
            while True:
                await asyncio.sleep(self.lease_seconds / 3)
                try:
                    await renew(self.lease(owner))
                except Exception as error:  # a lost connection: the next beat may get through
                    stop_if_cancelled(error)
                    log.exception("renewing a lease failed; retrying")

        beating = asyncio.create_task(heartbeat(), name=f"lease {owner}")
        try:
            yield
        finally:
            await stopped(beating)

    async def watch(
        self,
        active: Callable[[], Collection[str]],
        agents: Collection[str],
        claimed: Callable[[Run], Awaitable[object]],
        also: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        """Renew this process's leases and claim runs whose process died, forever: each
        claimed run goes to `claimed`, RUNNING to be resumed, or ERROR if it was given up.
        `also` is more of the same at each beat: work that waits on the clock, done by
        any live process (approvals past their time, see runpoint.runs.approvals)."""
        while True:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                if running := active():
                    until = now() + self.lease_seconds
                    await self.storage.renew_leases(self.owner, running, until)
                    self.renewed_until = until
                # members' runs are not among them: their leaders resume them
                for run in await self.storage.expired_runs(now(), agents):
                    await self._recover(run, claimed)
                if also is not None:
                    await also()
            except Exception as error:  # a lost database connection must not end the watch
                stop_if_cancelled(error)
                log.exception("lease watch failed; retrying")

    async def _recover(self, run: Run, claimed: Callable[[Run], Awaitable[object]]) -> None:
        giving_up = run.recoveries >= self.max_recoveries
        if not giving_up:
            run.recover()  # a PENDING run never got going: it starts
        self.stamp(run)
        try:
            await self.storage.save(run, [], None)  # the claim: one process wins
            # ended only once claimed (if this process dies between, the next sweep ends it)
            if giving_up:
                await self._give_up(run)
        except Conflict:
            return
        # a member run is not resumed but cancelled: `claimed` says so (its crew run ended)
        if run.status is RunStatus.RUNNING and run.parent_run_id is None:
            log.info("resuming run %s after its process was lost", run.run_id)
        await claimed(run)

    async def _give_up(self, run: Run) -> None:
        """End a run claimed from its lost process with the reason. Its log ends where it
        is read now: the claim waited for an append of that process under way, and refuses
        its later ones (a RunError given a seq read before the claim could lose that seq to
        such an append, whose event would stand)."""
        run.end(
            RunStatus.ERROR,
            f"the run's process was lost {run.recoveries + 1} times; "
            f"it was resumed {run.recoveries} times and is not resumed again",
        )
        # its stream ends as any run's that failed, with the reason
        error = RunEvent.of(run, "RunError", error=run.error, usage=run.usage)
        error.seq = await self.storage.last_event_seq(run.run_id) + 1
        self.stamp(run)
        await self.storage.save(run, [], None, events=[error])
