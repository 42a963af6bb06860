"""Schedules: make, change and remove them (a team's own), fire a tick or a trigger as an
ordinary run, and settle what was fired: a failed run retried from its last checkpoint
(continue from end, in place), one over its timeout cancelled. The loop that calls `fire`
and `settle` is `runpoint.durable.schedules`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from runpoint.core import tenancy
from runpoint.core.errors import ConfigurationError, Conflict, InvalidArguments, NotFound
from runpoint.core.schedule import UNFINISHED, Schedule, ScheduleRun, checked
from runpoint.core.types import RunStatus, new_id, now
from runpoint.runs.commands import Commands, CreateRun
from runpoint.runs.continuation import ContinueRun
from runpoint.seams.host import PluginHost
from runpoint.seams.storage import Storage


class Schedules:
    def __init__(
        self,
        storage: Storage,
        host: PluginHost,
        commands: Commands,
        agents: Mapping[str, object],
        *,
        clock: Callable[[], float] = now,
    ) -> None:
        self.storage = storage
        self.host = host
        self.commands = commands
        self.agents = agents
        self.clock = clock

    # -- what a team does to its schedules ------------------------------------------

    async def create(self, schedule: Schedule) -> Schedule:
        """Store a new schedule of the caller's team, armed for its first tick."""
        self._known_agent(schedule.agent_id)
        self._known_model(schedule.model)
        made = msgspec.structs.replace(
            checked(schedule), team_id=tenancy.current().team, created_at=self.clock()
        ).armed(self.clock())
        await self.storage.put_schedule(made)
        return made

    async def get(self, schedule_id: str) -> Schedule:
        schedule = await self.storage.get_schedule(schedule_id)
        if schedule is None or schedule.team_id != tenancy.current().team:
            raise NotFound(f"schedule {schedule_id} not found")  # another team's: unknown
        return schedule

    async def page(self, *, limit: int, offset: int) -> list[Schedule]:
        team = tenancy.current().team
        return await self.storage.list_schedules(team_id=team, limit=limit, offset=offset)

    async def update(self, schedule_id: str, changes: Mapping[str, Any]) -> Schedule:
        """Change the fields given; a changed cron expression, timezone or `enabled`
        re-arms it from now (ticks passed while disabled never fire)."""
        schedule = await self.get(schedule_id)
        if not changes:
            return schedule
        if "agent_id" in changes:
            self._known_agent(changes["agent_id"])
        if "model" in changes:
            self._known_model(changes["model"])
        changed = checked(msgspec.structs.replace(schedule, **changes))
        rearm = {"cron_expr", "timezone", "enabled"} & changes.keys()
        at = self.clock()
        changed = changed.armed(at) if rearm else msgspec.structs.replace(changed, updated_at=at)
        await self.storage.put_schedule(changed)
        return changed

    async def delete(self, schedule_id: str) -> None:
        await self.get(schedule_id)
        await self.storage.delete_schedule(schedule_id)

    async def runs(self, schedule_id: str, *, limit: int, offset: int) -> list[ScheduleRun]:
        await self.get(schedule_id)
        return await self.storage.list_fired(schedule_id, limit=limit, offset=offset)

    async def run(self, schedule_id: str, run_id: str) -> ScheduleRun:
        await self.get(schedule_id)
        fired = await self.storage.get_fired(schedule_id, run_id)
        if fired is None:
            raise NotFound(f"run {run_id} of schedule {schedule_id} not found")
        return fired

    async def trigger(self, schedule_id: str, idempotency_key: str | None) -> ScheduleRun:
        """Fire one run now (a retry with the same key gets the same run); a disabled
        schedule fires nothing (Conflict)."""
        schedule = await self.get(schedule_id)
        if not schedule.enabled:
            raise Conflict(f"schedule {schedule_id} is disabled: enable it to trigger it")
        key = f"schedule {schedule_id} trigger {idempotency_key or new_id()}"
        fired, _ = await self._fire(schedule, key, None)
        return fired

    # -- what the loop does ----------------------------------------------------------

    async def fire(self, schedule: Schedule, tick: float) -> tuple[ScheduleRun, bool]:
        """Fire `tick` as an ordinary run, once whichever processes race for it: its record,
        and whether this call recorded it (False: another process had fired it)."""
        return await self._fire(schedule, f"schedule {schedule.schedule_id} {tick!r}", tick)

    async def _fire(
        self, schedule: Schedule, key: str, tick: float | None
    ) -> tuple[ScheduleRun, bool]:
        request = CreateRun(
            agent_id=schedule.agent_id,
            message=schedule.message,
            session_id=schedule.session_id,
            user_id=schedule.user_id,
            background=True,
            model=schedule.model or msgspec.UNSET,
        )
        principal = tenancy.Principal(schedule.team_id, schedule.user_id)
        with tenancy.acting_as(principal):
            handle = await self.commands.create_run(request, idempotency_key=key)
        run = handle.run
        # an answer replayed: another call made the run, and may have recorded it
        known = handle.replayed and await self.storage.get_fired(schedule.schedule_id, run.run_id)
        if known:
            return known, False
        fired = ScheduleRun(
            schedule_id=schedule.schedule_id,
            # a trigger's tick is when its run was made: a retry of it records the same
            tick=run.created_at if tick is None else tick,
            run_id=run.run_id,
            session_id=run.session_id,
            team_id=schedule.team_id,
            trigger="cron" if tick is not None else "manual",
            fired_at=run.created_at,
            attempt_at=run.created_at,
            deadline=run.created_at + schedule.timeout_seconds,
        )
        return fired, await self.storage.record_fired(fired)

    async def settle(self, fired: ScheduleRun) -> None:
        """Cancel the run if over its timeout, retry it if it failed and has retries left
        (once its delay passed), else mark it settled."""
        run = await self.storage.get_run(fired.run_id)
        schedule = await self.storage.get_schedule(fired.schedule_id)
        at = self.clock()
        if run is not None and schedule is not None:
            principal = tenancy.Principal(schedule.team_id, schedule.user_id)
            if run.status in UNFINISHED:
                if at - fired.attempt_at > schedule.timeout_seconds:
                    with tenancy.acting_as(principal):
                        await self.commands.cancel(run.run_id)
                return  # settled once it ended
            if run.status is RunStatus.ERROR and fired.attempt <= schedule.max_retries:
                if at < run.updated_at + schedule.retry_delay_seconds:
                    return
                retry = msgspec.structs.replace(
                    fired,
                    attempt=fired.attempt + 1,
                    attempt_at=at,
                    deadline=at + schedule.timeout_seconds,
                )
                if await self.storage.update_fired(retry, fired.attempt):  # one retrier
                    request = ContinueRun(run_id=run.run_id, background=True)
                    key = f"schedule {fired.schedule_id} {fired.tick!r} attempt {retry.attempt}"
                    with tenancy.acting_as(principal):
                        await self.commands.continue_run(request, idempotency_key=key)
                    self.host.hook.runpoint_schedule_retried(schedule=schedule, fired=retry)
                return
        await self.storage.update_fired(msgspec.structs.replace(fired, settled=True), fired.attempt)

    def _known_agent(self, agent_id: str) -> None:
        if agent_id not in self.agents:
            raise InvalidArguments(f"endpoint: this server has no agent {agent_id!r}")

    def _known_model(self, model: str | None) -> None:
        if model is None:
            return
        try:
            self.host.model(model)
        except ConfigurationError as exc:
            raise InvalidArguments(f"payload.model: {exc}") from None
