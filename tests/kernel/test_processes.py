"""Several processes on one database at once: every invariant holds afterwards."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from runpoint.core.types import RunStatus, Session
from runpoint.facade import Runpoint
from runpoint.plugins.demo import agents

PROCESSES = 3


async def test_several_processes_keep_every_invariant(database: str) -> None:
    async with Runpoint(agents, database=database) as rp:  # migrate once, before the crowd
        await rp.storage.create_sessions([Session(session_id="shared", agent_id="travel-agent")])
    workers = [
        await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "tests.kernel.worker", database, f"w{i}", "shared"),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=Path(__file__).parents[2],
        )
        for i in range(PROCESSES)
    ]
    async with asyncio.timeout(240):
        outputs = [await w.communicate() for w in workers]
    assert [w.returncode for w in workers] == [0] * PROCESSES, [err for _, err in outputs]
    done = [json.loads(out) for out, _ in outputs]
    assert sum(d["created"] for d in done) == PROCESSES * 8
    assert sum(d["shared"] for d in done) == PROCESSES * 4
    assert sum(d["forked"] for d in done) > 0

    async with Runpoint(agents, database=database) as rp:
        sessions = await rp.list_sessions(limit=10_000)
        runs = {r.run_id: r for s in sessions for r in await rp.list_runs(s.session_id)}
        copies = [r for r in runs.values() if r.forked_from_session_id is not None]
        made = sum(d["created"] + d["shared"] + d["forked"] for d in done)
        assert len(runs) == made + len(copies)
        for run in runs.values():
            assert run.status is RunStatus.COMPLETED, run
            detail = await rp.get_run(run.run_id)
            # no lost message, no duplicate or missing index
            assert len(detail.messages) == run.message_count
            assert len({m.id for m in detail.messages}) == run.message_count
            # every checkpoint's messages are there
            _, timeline = await rp.timeline(run.run_id)
            assert timeline[-1].message_index == run.message_count
            for checkpoint in timeline:
                if checkpoint.reason == "checkpoint":
                    assert detail.messages[checkpoint.message_index - 1].role == "tool"
            # lineage intact
            for segment in run.segments:
                assert await rp.storage.get_run(segment.run_id) is not None
            if run.forked_from_run_id is not None:
                assert await rp.storage.get_run(run.forked_from_run_id) is not None
            if run.previous_run_id is not None:
                assert await rp.storage.get_run(run.previous_run_id) is not None
        # new runs in the shared session waited their turn: each follows the run made
        # just before it (forks of its runs may come between)
        shared = await rp.list_runs("shared")
        new = [i for i, r in enumerate(shared) if r.forked_from_run_id is None]
        assert len(new) == PROCESSES * 4
        assert [shared[i].previous_run_id for i in new[1:]] == [
            shared[i - 1].run_id for i in new[1:]
        ]
