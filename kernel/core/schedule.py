"""A schedule: runs of an agent that start themselves on a cron expression's ticks, in a
timezone; and the record of each run one fired (its tick, its attempts).

A tick is an instant (epoch seconds) the cron expression names in the schedule's zone, by
that zone's rules (croniter over zoneinfo): a wall-clock time that a spring-forward skips
fires at the first instant after it; one that a fall-back repeats fires at each.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec
from croniter import croniter

from runpoint.core.errors import InvalidArguments
from runpoint.core.stamps import now
from runpoint.core.tenancy import DEFAULT_TEAM
from runpoint.core.types import RunStatus

# what ticks missed while no server ran turn into: nothing, or one run for all of them
Missed = Literal["skip", "run_once"]
# how late a tick may still be fired under "skip" (a tick later than this was missed)
GRACE_SECONDS = 60.0
# the statuses of a fired run the loop waits on (and times out)
UNFINISHED = (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED)
# those of one nothing more is done to (a failed one may be retried)
DONE = frozenset(RunStatus) - {*UNFINISHED, RunStatus.ERROR}


class Schedule(msgspec.Struct, omit_defaults=True, kw_only=True):
    schedule_id: str
    name: str
    agent_id: str
    message: str  # the input of each run it fires
    team_id: str = DEFAULT_TEAM
    description: str | None = None
    session_id: str | None = None  # one fixed session; None: a new session per tick
    user_id: str | None = None
    model: str | None = None  # every run it fires starts with this one; None: the agent's
    cron_expr: str = ""  # "": on demand (trigger only)
    timezone: str = "UTC"
    timeout_seconds: int = 3600
    max_retries: int = 0
    retry_delay_seconds: int = 60
    missed: Missed = "skip"
    enabled: bool = True
    next_run_at: float | None = None  # the next tick not yet fired; None: none to come
    created_at: float = msgspec.field(default_factory=now)
    updated_at: float = msgspec.field(default_factory=now)

    def next_tick(self, after: float) -> float | None:
        """The first tick strictly after `after` (None for an on-demand schedule)."""
        if not self.cron_expr:
            return None
        start = datetime.fromtimestamp(after, ZoneInfo(self.timezone))
        return float(croniter(self.cron_expr, start).get_next(float))

    def armed(self, at: float) -> Schedule:
        """This schedule with its next tick after `at` if enabled (none if disabled)."""
        next_run_at = self.next_tick(at) if self.enabled else None
        return msgspec.structs.replace(self, next_run_at=next_run_at, updated_at=at)


def checked(schedule: Schedule) -> Schedule:
    """The schedule if its cron expression and timezone can be read; InvalidArguments (a
    422) naming the field if not."""
    if schedule.cron_expr and not croniter.is_valid(schedule.cron_expr):
        raise InvalidArguments(f"cron_expr: {schedule.cron_expr!r} is not a cron expression")
    try:
        ZoneInfo(schedule.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArguments(f"timezone: {schedule.timezone!r} is not an IANA timezone") from None
    return schedule


class ScheduleRun(msgspec.Struct, omit_defaults=True, kw_only=True):
    """A run a schedule fired, at its tick (a trigger's tick is the instant it came). One
    per (schedule_id, tick). `attempt` counts its executions: each retry continues the run
    from its last checkpoint and takes the next; `attempt_at` is when the last began.
    Settled once nothing more is done to it (it ended, and no retry is left); `deadline`
    is when its attempt runs out of time (the loop looks at it then, or once it ended)."""

    schedule_id: str
    tick: float
    run_id: str
    session_id: str
    team_id: str = DEFAULT_TEAM
    trigger: Literal["cron", "manual"] = "cron"
    attempt: int = 1
    fired_at: float = msgspec.field(default_factory=now)
    attempt_at: float = msgspec.field(default_factory=now)
    settled: bool = False
    deadline: float | None = None  # None: look at it on every pass
