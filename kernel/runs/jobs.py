"""The job queue as AgentOS shows it: a team's runs as jobs, waiting (PENDING), running,
failed (ERROR) or ended otherwise, with their attempts and last error; and requeueing a
failed one, which resumes it in place from the end of its transcript in the background,
as a continue from its end does: the loop takes the step that failed again (a model turn,
or the batch of calls it was in), and a finished tool call never runs again (its result
is recorded; a side-effecting call that may have run waits for a person)."""

from __future__ import annotations

from collections.abc import Collection

from runpoint.core import tenancy
from runpoint.core.types import Run, RunStatus
from runpoint.runs.commands import Commands
from runpoint.runs.continuation import ContinueRun
from runpoint.runs.executor import RunHandle
from runpoint.seams.storage import Storage


class Jobs:
    def __init__(self, storage: Storage, commands: Commands) -> None:
        self.storage = storage
        self.commands = commands

    async def list(
        self, statuses: Collection[RunStatus], *, limit: int, offset: int
    ) -> tuple[list[Run], int]:
        """A page of the current team's runs in `statuses`, newest first, and the total."""
        team = tenancy.current().team
        return await self.storage.runs_by_status(team, statuses, limit=limit, offset=offset)

    async def stats(self) -> dict[RunStatus, int]:
        return await self.storage.count_runs_by_status(tenancy.current().team)

    async def requeue(self, run_id: str, *, idempotency_key: str | None = None) -> RunHandle:
        """Resume a run that ended ERROR, in the background (Conflict if it did not
        fail); a retry with the same key gets the first request's run."""
        request = ContinueRun(run_id=run_id, background=True, expect=RunStatus.ERROR)
        return await self.commands.continue_run(request, idempotency_key=idempotency_key)
