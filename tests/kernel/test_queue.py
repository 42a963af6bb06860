"""The run queue: runs accepted by one process are executed by another; cancel reaches a
run still in the queue, and a run executing in another OS process."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from runpoint import hookimpl
from runpoint.core.types import Run, RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost
from runpoint.seams.runqueue import QueuedRun, RunQueueFactory
from tests import postgres
from tests.kernel.queue_worker import agents, locate
from tests.kernel.test_recovery import until

ON_POSTGRES = pytest.mark.parametrize("database", ["postgresql"], indirect=True)


@asynccontextmanager
async def worker(database: str, name: str, *options: str) -> AsyncIterator[list[str]]:
    """A server process (tests.kernel.queue_worker) for the block; yields what it
    printed before it was ready."""
    child = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "tests.kernel.queue_worker", database, name, *options),
        stdout=asyncio.subprocess.PIPE,
        cwd=Path(__file__).parents[2],
    )
    assert child.stdout is not None
    printed: list[str] = []
    try:
        async with asyncio.timeout(30):
            while (line := (await child.stdout.readline()).decode().strip()) != "ready":
                assert line, "the worker exited"
                printed.append(line)
        yield printed
    finally:
        child.kill()
        await child.wait()


async def jobs_in_queue(database: str) -> int:
    count: int = await postgres.fetch_value(database, "SELECT count(*) FROM pgqueuer")
    return count


async def queue_drained(database: str) -> bool:
    """Whether the queue empties: a job is acknowledged after its run ends, in a batch
    of acknowledgements pgqueuer writes a moment later."""
    async with asyncio.timeout(30):
        while await jobs_in_queue(database):  # noqa: ASYNC110 (polls the database)
            await asyncio.sleep(0.05)
    return True


class Twice:
    """A run queue, plugged in through runpoint_run_queues, that delivers each job twice
    at once (queues may deliver a job more than once)."""

    def __init__(self) -> None:
        self.jobs: list[QueuedRun] = []
        self.started: list[str] = []
        self.appended: list[int] = []

    @hookimpl
    def runpoint_run_queues(self) -> Mapping[str, RunQueueFactory]:
        return {"sqlite": lambda url: self, "postgresql": lambda url: self}

    @hookimpl
    def runpoint_run_started(self, run: Run) -> None:
        self.started.append(run.run_id)

    @hookimpl
    def runpoint_message_appended(self, index: int) -> None:
        self.appended.append(index)

    async def open(
        self, agent_ids: Collection[str], execute: Callable[[QueuedRun], Awaitable[None]]
    ) -> None:
        self.execute = execute

    async def close(self) -> None:
        pass

    async def put(self, job: QueuedRun) -> None:
        self.jobs.append(job)

    async def deliver(self) -> None:
        await asyncio.gather(*(self.execute(job) for job in self.jobs for _ in range(2)))


async def test_a_queued_run_is_accepted_durably_and_executed_once(database: str) -> None:
    queue = Twice()
    async with Runpoint(agents, database=database, host=PluginHost([queue])) as rp:
        handle = await rp.create_run(CreateRun(agent_id="marked", message="Paris", background=True))
        accepted = await rp.get_run(handle.run.run_id)
        # nobody's yet, its input durable: any process (or the lease watch) can take it
        assert accepted.run.status is RunStatus.PENDING and accepted.run.lease_owner is None
        assert [m.content for m in accepted.messages] == ["Paris"]
        assert queue.jobs == [QueuedRun(handle.run.run_id, "marked")]
        await queue.deliver()
        run = await handle.result()
    assert run.status is RunStatus.COMPLETED and run.recoveries == 0
    assert queue.started == [run.run_id]  # two deliveries, one execution
    assert queue.appended == list(range(run.message_count))  # each message told once


async def test_a_run_resumed_in_the_background_is_claimed_with_its_new_input(
    database: str,
) -> None:
    queue = Twice()
    short = Agent(id="short", model="scripted:demo", tools=[locate], max_turns=1)
    async with Runpoint([short], database=database, host=PluginHost([queue])) as rp:
        failed = await (await rp.create_run(CreateRun(agent_id="short", message="Paris"))).result()
        assert failed.status is RunStatus.ERROR  # out of turns after its tool batch
        handle = await rp.continue_run(
            ContinueRun(run_id=failed.run_id, input="Thanks", background=True)
        )
        claimed = await rp.get_run(failed.run_id)
        # one write took the run back and added its input, before any process executes it
        assert (claimed.run.status, claimed.run.error) == (RunStatus.PENDING, None)
        assert [m.content for m in claimed.messages[3:]] == ["Thanks"]
        await queue.deliver()
        run = await handle.result()
        starts = [
            e.event
            async for batch in await rp.follow(run.run_id)
            for e in batch
            if e.event in ("RunStarted", "RunContinued")
        ]
    assert (run.run_id, run.status, run.content) == (
        failed.run_id,
        RunStatus.COMPLETED,
        "You said: Thanks",
    )
    assert queue.appended == list(range(run.message_count))  # each message told once
    assert starts == ["RunStarted", "RunContinued"]  # its stream says it was continued


async def test_a_queued_fork_runs_on_the_model_it_was_switched_to(database: str) -> None:
    queue = Twice()
    async with Runpoint(agents, database=database, host=PluginHost([queue])) as rp:
        source = await (await rp.create_run(CreateRun(agent_id="marked", message="Paris"))).result()
        handle = await rp.continue_run(
            ContinueRun(
                run_id=source.run_id, input="Say it back", model="scripted:echo", background=True
            )
        )
        await queue.deliver()
        fork = await handle.result()
        answer = (await rp.get_run(fork.run_id)).messages[-1]
    assert (answer.model, answer.content) == ("scripted:echo", "Say it back")


@ON_POSTGRES
async def test_runs_accepted_by_one_process_are_executed_by_another(database: str) -> None:
    async with (
        Runpoint(agents, database=database, execute_queued=False) as accepting,
        worker(database, "worker-b"),
    ):
        handles = [
            await accepting.create_run(
                CreateRun(agent_id="marked", message=f"{city} and Lima", background=True)
            )
            for city in ("Paris", "Tokyo", "Lagos", "Kyoto")
        ]
        assert {h.run.status for h in handles} == {RunStatus.PENDING}
        runs = [await until(accepting, h.run.run_id, RunStatus.COMPLETED) for h in handles]
        for run in runs:
            tools = (await accepting.get_run(run.run_id)).tools
            assert [t.result.split(", answered by ")[1] for t in tools if t.result] == [
                "worker-b",
                "worker-b",
            ]
            assert run.recoveries == 0  # taken from the queue, not by the lease watch
        assert await queue_drained(database)


@ON_POSTGRES
async def test_cancel_of_a_run_still_in_the_queue_ends_it_cancelled(database: str) -> None:
    async with Runpoint(agents, database=database, execute_queued=False) as accepting:
        handle = await accepting.create_run(
            CreateRun(agent_id="marked", message="Paris", background=True)
        )
        assert await jobs_in_queue(database) == 1
        cancelled = await accepting.cancel(handle.run.run_id)
        assert cancelled.status is RunStatus.CANCELLED
        async with worker(database, "worker-b"):  # its job comes up, and finds it cancelled
            assert await queue_drained(database)
        detail = await accepting.get_run(handle.run.run_id)
    assert detail.run.status is RunStatus.CANCELLED
    assert [m.content for m in detail.messages] == ["Paris"]  # the input kept, nothing run


async def test_cancel_sent_to_another_os_process_stops_the_run_at_its_next_boundary(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GATES", str(tmp_path))
    async with (
        Runpoint(agents, database=database, execute_queued=False) as here,
        worker(database, "worker-b", "--start-gated") as printed,
    ):
        [run_id] = printed  # the worker started it, and executes it
        async with asyncio.timeout(30):
            while not (tmp_path / "started").exists():  # noqa: ASYNC110 (a file the worker makes)
                await asyncio.sleep(0.02)
        asked = await here.cancel(run_id)
        assert asked.cancel_requested and asked.status is RunStatus.RUNNING
        (tmp_path / "open").touch()
        run = await until(here, run_id, RunStatus.CANCELLED)
        tools = (await here.get_run(run_id)).tools
    # the batch under way finished, in the worker; the next model turn never started
    assert [t.result for t in tools] == ["Paris held by worker-b"]
    assert run.message_count == 3 and run.last_checkpoint_at_message_index == 3
