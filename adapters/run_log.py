"""The operator's log of runs: one line for each run that ends ERROR, with its ids and
reason (a failing run otherwise shows only as a 200 in the request log)."""

from __future__ import annotations

import json
import logging

from runpoint import hookimpl
from runpoint.types import Run, RunStatus

log = logging.getLogger("runpoint.runs")


class RunLog:
    @hookimpl
    def runpoint_run_finished(self, run: Run) -> None:
        if run.status is RunStatus.ERROR:
            log.error(
                "run ended ERROR run_id=%s session_id=%s agent_id=%s reason=%s",
                run.run_id,
                run.session_id,
                run.agent_id,
                json.dumps(run.error or "unknown"),  # quoted, so the line stays one line
            )
