"""The operator's log of runs: one line for each run that ends ERROR, with its ids and
reason (a failing run otherwise shows only as a 200 in the request log)."""

from __future__ import annotations

import logging

from runpoint import hookimpl
from runpoint.core.types import Run, RunStatus

log = logging.getLogger("runpoint.runs")


class RunLog:
    @hookimpl
    def runpoint_run_finished(self, run: Run) -> None:
        if run.status is RunStatus.ERROR:
            fields = {
                "run_id": run.run_id,
                "session_id": run.session_id,
                "agent_id": run.agent_id,
                "reason": run.error or "unknown",
            }
            log.error("run ended ERROR", extra={"fields": fields})
