"""The retention sweeper: in every server process, one sweep at a time across processes,
each a bounded batch, off the request path.

A sweep reads the next `batch` finished runs, in the order they were made (the table is
walked a batch per sweep, from where the last sweep stopped, back to the start at its end
or at runs too young for their policy's time limits), and applies each one's policy:
its agent's `Retention` over the server's. It removes the runs past `runs` (the storage
keeps what a surviving run or session checkpoint reads, and every run a later one
follows), keeps the last `checkpoints` checkpoints of the others, and drops the event
logs of those past `events`. Each removal is one transaction: a sweep killed midway
leaves every run whole or gone, and the next sweep goes on.

Each sweep also removes answered Idempotency-Keys first claimed longer than `keys` seconds
ago (a schedule's tick adds one), in transactions of `KEY_BATCH` at most: a retry of a
request that old makes a new run. Nothing else reads an old key again: a schedule's tick
fires within a grace of its time, and one found late is checked against the runs the
schedule recorded (see runpoint.durable.schedules); claims not answered stay. And it goes
on removing the rows of teams erased (`runpoint team erase` begins that; one it left midway,
killed, ends here), `ERASED_BATCHES` transactions of `ERASED_SESSIONS` sessions at most.

Processes take turns through a claim on one Idempotency-Key (scope `runpoint`), held
under a lease while a sweep goes: a process that died mid-sweep leaves a claim that runs
out, and another takes it over.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping

from runpoint.core.types import KeyClaim, Run, new_id, now, stopwatch
from runpoint.durable import SWEEP_BATCH, SWEEP_SECONDS
from runpoint.durable.periodic import Periodic
from runpoint.seams.host import PluginHost
from runpoint.seams.retention import Removed, Retention
from runpoint.seams.storage import ErasesTeams, Storage

log = logging.getLogger("runpoint.retention")
CLAIM_SCOPE, CLAIM_KEY = "runpoint", "retention-sweep"
KEY_BATCH = 1000  # answered keys a transaction removes at most
KEY_BATCHES = 20  # transactions of keys a sweep takes at most (20,000 a minute by default)
ERASED_SESSIONS, ERASED_BATCHES = 20, 10  # an erased team's sessions a sweep removes


class Sweeper(Periodic):
    name, log = "retention sweep", log

    def __init__(
        self,
        storage: Storage,
        host: PluginHost,
        server: Retention,
        agents: Mapping[str, Retention | None] = {},
        *,
        batch: int = SWEEP_BATCH,
        every: float = SWEEP_SECONDS,
        reclaim_pages: int = 2000,
        keys: float = math.inf,
    ) -> None:
        if batch < 1 or not every > 0:
            raise ValueError(
                f"a sweep reads 1 run or more, every so many seconds: {batch}, {every}"
            )
        self.storage = storage
        self.host = host
        self.server = server
        self.agents = {a: r.over(server) for a, r in agents.items() if r is not None}
        self.batch = batch
        self.every = every
        self.reclaim_pages = reclaim_pages  # at most this much space back per sweep
        self.keys = keys  # seconds an answered Idempotency-Key is kept
        self.after = 0  # where the next sweep reads on from

    @property
    def removes_runs(self) -> bool:
        """Whether some policy removes anything of runs (else no read of them is worth it)."""
        return any(r.removes for r in (self.server, *self.agents.values()))

    @property
    def removes(self) -> bool:
        """Whether a sweep removes anything at all."""
        return self.removes_runs or self.keys != math.inf

    def policy(self, run: Run) -> Retention:
        return self.agents.get(run.agent_id, self.server)

    async def sweep(self, *, dry_run: bool = False) -> Removed:
        """One bounded batch: the next finished runs, each as its policy says; then the
        answered keys past their time."""
        removed = await self._sweep_runs(dry_run) if self.removes_runs else Removed()
        if not dry_run:
            removed.keys = await self._remove_keys()
            removed.sessions += await self._remove_erased()
            removed.reclaimed = await self.storage.reclaim_space(self.reclaim_pages)
        return removed

    async def _remove_keys(self) -> int:
        if self.keys == math.inf:
            return 0
        before, gone = now() - self.keys, 0
        for _ in range(KEY_BATCHES):
            gone += (took := await self.storage.remove_answered_keys(before, KEY_BATCH))
            if took < KEY_BATCH:
                break
        return gone

    async def _remove_erased(self) -> int:
        if not isinstance(self.storage, ErasesTeams):
            return 0
        gone = 0
        for _ in range(ERASED_BATCHES):
            if (took := await self.storage.remove_erased(ERASED_SESSIONS)) is None:
                break
            gone += took
        return gone

    async def _sweep_runs(self, dry_run: bool) -> Removed:
        runs, self.after = await self.storage.finished_runs(self.after, self.batch)
        ended = now()
        expired = [r for r in runs if _past(r, self.policy(r).runs, ended)]
        if any(_young(r, self.policy(r), ended) for r in runs):
            # runs are read in the order they were made: those after are younger still,
            # and the older ones that were young when read are read again first
            self.after = 0
        removed = Removed()
        for chunk in _chunks(expired, self.storage.removals_per_transaction):
            removed += await self.storage.remove_runs(chunk, dry_run=dry_run)
        gone = set(removed.run_ids)
        stale = []
        for run in (r for r in runs if r.run_id not in gone):
            policy = self.policy(run)
            if policy.checkpoints is not None and policy.checkpoints != math.inf:
                keep = int(policy.checkpoints)
                removed += await self.storage.trim_checkpoints(run.run_id, keep, dry_run=dry_run)
            if _past(run, policy.events, ended):
                stale.append(run.run_id)
        removed += await self.storage.drop_events(stale, dry_run=dry_run)
        return removed

    async def sweep_all(self, *, dry_run: bool = False) -> Removed:
        """Sweeps until every finished run was read once (a prune from the command line)."""
        self.after, removed = 0, Removed()
        while True:
            removed += await self.sweep(dry_run=dry_run)
            if not self.after:
                return removed

    async def sweep_in_turn(self) -> Removed | None:
        """One sweep if no other process is sweeping (None if one is), reported."""
        claim = KeyClaim(CLAIM_SCOPE, CLAIM_KEY, new_id())
        # a sweep is a few transactions: the lease outlasts one by far
        if await self.storage.claim_key(claim, "sweep", now() + max(60.0, 2 * self.every)):
            return None
        try:
            took = stopwatch()
            removed = await self.sweep()
            timing = took()
        finally:
            await self.storage.release_key(claim)
        log.info(
            "retention sweep: %d runs, %d sessions, %d messages, %d checkpoints, %d events, "
            "%d idempotency keys, %d bytes removed, %d bytes returned to the file system, "
            "in %.3fs",
            removed.runs,
            removed.sessions,
            removed.messages,
            removed.checkpoints,
            removed.events,
            removed.keys,
            removed.size,
            removed.reclaimed,
            timing.seconds,
        )
        self.host.hook.runpoint_retention_swept(removed=removed, timing=timing)
        return removed

    def start(self) -> None:
        if self.removes:
            super().start()

    async def once(self) -> Removed | None:
        return await self.sweep_in_turn()


def _chunks(runs: list[Run], size: int) -> list[list[str]]:
    """The runs' ids in removals of about `size` runs (writers go on in between), a
    session's together (a run goes only with the later runs of its session that follow
    it)."""
    by_session: dict[str, list[str]] = {}
    for run in runs:
        by_session.setdefault(run.session_id, []).append(run.run_id)
    chunks: list[list[str]] = [[]]
    for ids in by_session.values():
        if chunks[-1] and len(chunks[-1]) + len(ids) > size:
            chunks.append([])
        chunks[-1] += ids
    return [c for c in chunks if c]


def _young(run: Run, policy: Retention, ended: float) -> bool:
    """Whether a finished run is not old enough yet for a time limit of its policy."""
    limits = [s for s in (policy.runs, policy.events) if s is not None and s != math.inf]
    return any(not _past(run, seconds, ended) for seconds in limits)


def _past(run: Run, seconds: float | None, ended: float) -> bool:
    """Whether a finished run ended longer than `seconds` ago (None or inf: never)."""
    return seconds is not None and seconds != math.inf and run.updated_at < ended - seconds
