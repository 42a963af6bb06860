"""Durable runs: a run whose process dies is resumed by another; cancel reaches any process."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from runpoint import hookimpl
from runpoint.core.sealing import Codec
from runpoint.core.types import Run, RunEvent, RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.sql.events import event_rows
from runpoint.plugins.sql.store import SqlStorage
from runpoint.runs.tool_calls import SKIPPED
from runpoint.seams.agent import Agent
from runpoint.seams.host import PluginHost
from tests import postgres
from tests.kernel import crashing


async def until(rp: Runpoint, run_id: str, *statuses: RunStatus) -> Run:
    async with asyncio.timeout(30):
        while (run := (await rp.get_run(run_id)).run).status not in statuses:  # noqa: ASYNC110 (polls as a client would)
            await asyncio.sleep(0.05)
    return run


async def test_another_process_resumes_a_run_whose_process_died(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "calls.txt"
    monkeypatch.setenv("COUNTER", str(counter))
    recovered: list[tuple[str, int]] = []

    class Watcher:
        @hookimpl
        def runpoint_run_recovered(self, run: Run) -> None:
            recovered.append((run.run_id, run.recoveries))

    run_id = await crashing.kill(database, counter)
    host = PluginHost([Watcher()])
    async with Runpoint([crashing.agent], database=database, lease_seconds=0.5, host=host) as rp:
        died = (await rp.get_run(run_id)).run
        run = await until(rp, run_id, RunStatus.COMPLETED)
        assert time.time() - (died.lease_expires_at or 0) < 5
    assert run.recoveries == 1 and run.lease_owner is None
    assert recovered == [(run_id, 1)]
    assert counter.read_text().split() == ["Paris", "Tokyo", "Lagos"]  # none twice


async def test_a_run_whose_process_died_as_it_was_born_resumes_with_its_input(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "calls.txt"
    monkeypatch.setenv("COUNTER", str(counter))
    run_id = await crashing.kill(database, counter, "born")  # before it wrote anything itself
    async with Runpoint([crashing.agent], database=database, lease_seconds=0.5) as rp:
        run = await until(rp, run_id, RunStatus.COMPLETED)
        [question, *_] = (await rp.get_run(run_id)).messages
    assert run.recoveries == 1
    assert (question.role, question.content) == ("user", crashing.QUESTION)
    assert counter.read_text().split() == ["Paris", "Tokyo", "Lagos"]


async def test_a_run_that_keeps_dying_ends_in_error(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "calls.txt"
    monkeypatch.setenv("COUNTER", str(counter))
    finished: list[tuple[str, RunStatus]] = []

    class Watcher:
        @hookimpl
        def runpoint_run_finished(self, run: Run) -> None:
            finished.append((run.run_id, run.status))

    run_id = await crashing.kill(database, counter)
    options = {"lease_seconds": 0.5, "max_recoveries": 0, "host": PluginHost([Watcher()])}
    async with Runpoint([crashing.agent], database=database, **options) as rp:  # type: ignore[arg-type]
        # a client that joined the run's stream before it was given up sees it end
        events = [e async for batch in await rp.follow(run_id) for e in batch]
        run = await until(rp, run_id, RunStatus.ERROR)
        reason = (
            "the run's process was lost 1 times; it was resumed 0 times and is not resumed again"
        )
        assert run.error == reason
        assert (events[-1].event, events[-1].data["error"]) == ("RunError", reason)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        # plugins are told after the run's last save, which the poll may see first
        async with asyncio.timeout(10):
            while not finished:  # noqa: ASYNC110 (the hook is the plugin's own)
                await asyncio.sleep(0.01)
        assert finished == [(run_id, RunStatus.ERROR)]
        # a person can still finish it: continue from end resumes it
        resumed = await (await rp.continue_run(ContinueRun(run_id=run_id))).result()
        assert resumed.status is RunStatus.COMPLETED
    assert counter.read_text().split() == ["Paris", "Tokyo", "Lagos"]


class Watched(SqlStorage):
    """The SQL storage, telling when a boundary's write begins."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.saving = asyncio.Event()

    async def save(self, *args: Any, **options: Any) -> None:
        self.saving.set()
        await super().save(*args, **options)


@contextlib.asynccontextmanager
async def appending(database: str, run: Run, event: RunEvent) -> AsyncIterator[None]:
    """An append of `run`'s writer under way (its run's row locked at its revision, its
    event inserted) from entry until exit, when it commits."""
    [(seq, data)] = event_rows(run, [event], Codec())
    if database.startswith("sqlite"):
        lite = sqlite3.connect(make_url(database).database or "", isolation_level=None)
        try:
            lite.execute("BEGIN IMMEDIATE")  # SQLite's one write lock
            lite.execute("INSERT INTO run_events VALUES (?, ?, ?)", (run.run_id, seq, data))
            yield
            lite.execute("COMMIT")
        finally:
            lite.close()
        return
    connection = await asyncpg.connect(postgres.dsn(database))
    try:
        async with connection.transaction():
            locked = "SELECT 1 FROM runs WHERE run_id = $1 AND revision = $2 FOR SHARE"
            assert await connection.fetchval(locked, run.run_id, run.revision) == 1
            inserted = "INSERT INTO run_events VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
            await connection.execute(inserted, run.run_id, seq, data)
            yield
    finally:
        await connection.close()


async def until_waiting(database: str) -> None:
    """Until a writer waits for a row lock (PostgreSQL; SQLite cannot tell)."""
    if database.startswith("sqlite"):
        return
    connection = await asyncpg.connect(postgres.dsn(database))
    waiting = (
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    try:
        async with asyncio.timeout(10):
            while not await connection.fetchval(waiting):  # noqa: ASYNC110 (polls the server)
                await asyncio.sleep(0.01)
    finally:
        await connection.close()


@pytest.mark.parametrize(
    ("max_recoveries", "ends", "then", "last"),
    [
        (0, RunStatus.ERROR, "RunError", "RunError"),  # given up
        (1, RunStatus.COMPLETED, "RunContinued", "RunCompleted"),  # resumed
    ],
)
async def test_a_run_claimed_while_its_lost_writer_appends_goes_on_after_its_event(
    database: str,
    storage: SqlStorage,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    max_recoveries: int,
    ends: RunStatus,
    then: str,
    last: str,
) -> None:
    """The process of a run whose lease ran out may still be alive (cut off, not dead),
    an append of it under way as another claims the run: its event stands, and the run
    goes on after it, resumed or given up."""
    monkeypatch.setenv("COUNTER", str(tmp_path / "calls.txt"))
    run_id = await crashing.kill(database, tmp_path / "calls.txt")
    lost = await storage.get_run(run_id)
    assert lost is not None
    writers = RunEvent.of(lost, "RunContent", content="late")
    writers.seq = await storage.last_event_seq(run_id) + 1
    watched = Watched(database)
    options = {"lease_seconds": 0.5, "max_recoveries": max_recoveries}
    rp = Runpoint([crashing.agent], storage=watched, **options)  # type: ignore[arg-type]
    try:
        async with appending(database, lost, writers):
            await rp.open()
            await watched.saving.wait()  # the lease watch claims the run, from what it read
            await until_waiting(database)
        run = await until(rp, run_id, ends)
    finally:
        await rp.close()
    log = await storage.read_events(lost, 0, 1000)
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    assert log[writers.seq - 1] == writers
    assert [e.event for e in log[writers.seq : writers.seq + 1]] == [then]
    assert (log[-1].event, log[-1].data.get("error")) == (last, run.error)
    # the lost process's later appends are refused
    later = RunEvent.of(lost, "RunContent", content="later")
    later.seq = writers.seq + 1
    assert not await storage.append_events(lost, [later])


gates: dict[str, asyncio.Event] = {}


async def hold(city: str) -> str:
    """A tool that keeps its run in flight until the test lets it go."""
    await gates["hold"].wait()
    return "held"


async def test_cancel_from_another_process_stops_the_run_at_its_next_boundary(
    database: str,
) -> None:
    gates["hold"] = asyncio.Event()
    agent = Agent(id="slow", model="scripted:demo", tools=[hold])
    async with (
        Runpoint([agent], database=database) as executing,
        Runpoint([agent], database=database) as other,
    ):
        handle = await executing.create_run(CreateRun(agent_id="slow", message="Paris and Tokyo"))
        await asyncio.sleep(0.2)  # the first tool call is under way
        asked = await other.cancel(handle.run.run_id)
        assert asked.cancel_requested and asked.status is RunStatus.RUNNING
        gates["hold"].set()
        run = await handle.result()
    assert run.status is RunStatus.CANCELLED
    # the batch under way finished; the next model turn never started
    assert run.message_count == 3 and run.last_checkpoint_at_message_index == 3


@pytest.mark.parametrize(
    ("decision", "result", "calls"),
    [
        ("Lagos: many", "Lagos: many", ["Paris", "Tokyo", "Lagos"]),  # a person supplies it
        (True, "Lagos: many", ["Paris", "Tokyo", "Lagos", "Lagos"]),  # run it again, knowingly
        (False, SKIPPED, ["Paris", "Tokyo", "Lagos"]),  # do not
    ],
)
async def test_a_side_effect_under_way_when_the_process_died_waits_for_a_person(
    database: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    decision: bool | str,
    result: str,
    calls: list[str],
) -> None:
    counter = tmp_path / "calls.txt"
    monkeypatch.setenv("COUNTER", str(counter))
    run_id = await crashing.kill(database, counter, "mid-call")
    assert counter.read_text().split() == ["Paris", "Tokyo", "Lagos"]  # Lagos's effect happened
    async with Runpoint([crashing.agent], database=database, lease_seconds=0.5) as rp:
        paused = await until(rp, run_id, RunStatus.PAUSED)
        [doubt] = [t for t in (await rp.get_run(run_id)).tools if t.in_doubt]
        assert (doubt.tool_args, doubt.result) == ({"city": "Lagos"}, None)
        assert paused.in_doubt == [doubt.tool_call_id]
        run = await (
            await rp.continue_run(ContinueRun(run_id=run_id, tools={doubt.tool_call_id: decision}))
        ).result()
        assert run.status is RunStatus.COMPLETED and run.in_doubt == []
        [lagos] = [
            t for t in (await rp.get_run(run_id)).tools if t.tool_call_id == doubt.tool_call_id
        ]
    assert lagos.result == result and not lagos.in_doubt
    assert counter.read_text().split() == calls


@pytest.mark.parametrize("lease_ran_out", [False, True])
async def test_a_cancel_accepted_while_the_runs_process_is_dead_wins(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lease_ran_out: bool
) -> None:
    counter = tmp_path / "calls.txt"
    monkeypatch.setenv("COUNTER", str(counter))
    # lease still held: the cancel waits for the process that resumes the run; ran out
    # (and no lease watch to resume it): the cancel ends it at once
    options = {"lease_seconds": 0.5, "recover": not lease_ran_out}
    async with Runpoint([crashing.agent], database=database, **options) as rp:  # type: ignore[arg-type]
        run_id = await crashing.kill(database, counter, "mid-call", lease_seconds=2.0)
        if lease_ran_out:
            died = (await rp.get_run(run_id)).run
            await asyncio.sleep((died.lease_expires_at or 0) - time.time())
        asked = await rp.cancel(run_id)
        assert asked.cancel_requested is not lease_ran_out
        run = await until(rp, run_id, RunStatus.CANCELLED, RunStatus.PAUSED)
        [doubt] = [t for t in (await rp.get_run(run_id)).tools if t.in_doubt]
    assert run.status is RunStatus.CANCELLED
    assert run.in_doubt == [doubt.tool_call_id]  # it says which call may have acted
    assert (doubt.tool_args, doubt.result) == ({"city": "Lagos"}, None)
    assert counter.read_text().split() == ["Paris", "Tokyo", "Lagos"]
