"""The in-memory backend runs runpoint end to end: `database="memory:"`, `--db memory:`."""

from __future__ import annotations

from runpoint.core.types import RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import agents as demo_agents
from runpoint.plugins.memory import MemoryStorage
from runpoint.seams.host import database_url


async def test_a_demo_agent_runs_forks_and_resumes_in_memory() -> None:
    async with Runpoint(demo_agents, database="memory:") as rp:
        assert isinstance(rp.storage, MemoryStorage) and rp.executor.queue is None
        run = await (
            await rp.create_run(
                CreateRun(agent_id="travel-agent", message="Paris, Tokyo and Lagos?")
            )
        ).result()
        assert run.status is RunStatus.COMPLETED, run.error
        _, timeline = await rp.timeline(run.run_id)
        assert [(c.message_index, c.reason) for c in timeline] == [
            (3, "checkpoint"),
            (5, "checkpoint"),
            (7, "checkpoint"),
            (8, "end"),
        ]
        snapshot = await rp.snapshot(run.run_id, 3)
        assert snapshot.detail.run.status is RunStatus.RUNNING

        fork = await (
            await rp.continue_run(ContinueRun(run_id=run.run_id, continue_from=3, input="Lima"))
        ).result()
        assert (fork.status, fork.forked_from_run_id) == (RunStatus.COMPLETED, run.run_id)
        forked = await rp.get_run(fork.run_id)
        assert forked.messages[:3] == (await rp.get_run(run.run_id)).messages[:3]

        paused = await (
            await rp.create_run(CreateRun(agent_id="booking-agent", message="Book Paris"))
        ).result()
        assert paused.status is RunStatus.PAUSED
        [call] = [t for t in (await rp.get_run(paused.run_id)).tools if t.result is None]
        handle = await rp.continue_run(
            ContinueRun(run_id=paused.run_id, tools={call.tool_call_id: True})
        )
        assert (await handle.result()).status is RunStatus.COMPLETED


def test_the_command_line_takes_memory_as_a_database() -> None:
    assert database_url("memory:") == "memory:"
