"""A cancel of a team run made through another process: it reaches the team run's members
at their next boundary, as an agent run's cancel reaches its run (the request is a flag in
the run's row, read back by each write of the process that executes it), including a
member whose run was written just after the cancel looked for the members."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from runpoint.core import transcript
from runpoint.core.types import IN_FLIGHT, Run, RunStatus
from runpoint.facade import CreateRun, Runpoint
from tests.crews.test_crew_cancel import agents
from tests.faults.test_sigkill import Server
from tests.http.test_streams import Stream

CITIES = "Paris Tokyo Lagos Kyoto Berlin Madrid"


async def calls_run(rp: Runpoint, run: Run) -> int:
    messages = await rp.storage.read_messages(run.segments, run.message_count)
    return len([m for m in messages if m.role == "tool"])


async def test_a_member_written_just_after_a_cancel_from_elsewhere_looked_is_cancelled(
    database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader's process writes its member's run only once the other process has asked
    the cancel and found no member to cancel: the member stops before its first step."""
    async with (
        Runpoint(agents, database=database) as executing,
        Runpoint(agents, database=database) as other,
    ):
        reached, go = asyncio.Event(), asyncio.Event()
        create_runs = executing.storage.create_runs

        async def gated(runs: Sequence[Run], *args: Any, **kwargs: Any) -> Any:
            if any(r.parent_run_id is not None for r in runs):
                reached.set()
                await go.wait()
            return await create_runs(runs, *args, **kwargs)

        monkeypatch.setattr(executing.storage, "create_runs", gated)
        handle = await executing.create_run(CreateRun(agent_id="crew", message=CITIES))
        await reached.wait()
        answer = await other.cancel(handle.run.run_id)
        assert answer.cancel_requested and answer.status is RunStatus.RUNNING
        assert await other.storage.member_runs(handle.run.run_id) == []  # none found
        go.set()
        run = await handle.result()
        assert run.status is RunStatus.CANCELLED, run.error
        (member,) = await executing.storage.member_runs(run.run_id)
        assert member.status is RunStatus.CANCELLED
        assert await calls_run(executing, member) == 0  # it gave no look-up a go


@pytest.fixture
def servers(database: str, tmp_path: Path) -> Iterator[list[Server]]:
    started: list[Server] = []
    try:
        for _ in range(2):  # one after the other: the first migrates the database
            server = Server(
                database, tmp_path / "unused.txt", "tests.crews.test_crew_cancel:agents"
            )
            server.start()
            started.append(server)
        yield started
    finally:
        for server in started:
            server.kill()


async def test_a_team_run_cancelled_through_another_server_stops_its_member_promptly(
    servers: list[Server], database: str
) -> None:
    executing, other = servers
    stream = Stream()
    async with httpx.AsyncClient(timeout=60) as client:

        async def create() -> None:
            form = {"message": CITIES, "stream": "true"}
            url = f"{executing.url}/teams/crew/runs"
            async with client.stream("POST", url, data=form) as response:
                await stream.read(response)

        creating = asyncio.create_task(create())
        started = (await stream.first("TeamRunStarted")).data
        await stream.first("ToolCallCompleted")  # the member's first look-up is done
        path = f"{other.url}/teams/crew/runs/{started['run_id']}/cancel"
        answer = await client.post(path, params={"session_id": started["session_id"]})
        assert answer.status_code == 200, answer.text
        async with asyncio.timeout(30):
            await creating
    names = [e.name for e in stream.events]
    assert names[-1] == "TeamRunCancelled", names
    async with Runpoint(agents, database=database) as rp:
        run = await rp.storage.get_run(started["run_id"])
        assert run is not None and run.status is RunStatus.CANCELLED
        (member,) = await rp.storage.member_runs(run.run_id)
        assert member.status is RunStatus.CANCELLED and member.status not in IN_FLIGHT
        # at its next boundary, not its end: a look-up or two more, of six
        assert await calls_run(rp, member) <= 3
        for each in (run, member):  # each whole: every call it made has its result
            messages = await rp.storage.read_messages(each.segments, each.message_count)
            assert transcript.unanswered_calls(messages) == []
