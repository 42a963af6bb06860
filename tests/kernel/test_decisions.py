"""A person's tool decisions are durable: written with the run they continue, so whoever
executes it (the accepting process, the run queue's, or the lease watch of any process
after a crash) applies them, and a decision to run a side effect runs it once at most."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from runpoint.core.types import Decision, RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.runs.tool_calls import REJECTED
from tests.kernel import deciding
from tests.kernel.test_queue import ON_POSTGRES, jobs_in_queue
from tests.kernel.test_recovery import until

BOOKED_BY_PHONE = "Lagos: booked by phone"


@pytest.fixture
def counter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The bookings made, counted outside any process (one line each)."""
    path = tmp_path / "bookings.txt"
    path.touch()
    monkeypatch.setenv("COUNTER", str(path))
    return path


async def paused(rp: Runpoint) -> tuple[str, dict[str, Decision]]:
    """A run paused on three bookings, and a person's decisions on them: book Paris, not
    Tokyo, and Lagos was booked by phone (here is the result)."""
    run = await (
        await rp.create_run(CreateRun(agent_id="booker", message="Book them all"))
    ).result()
    assert run.status is RunStatus.PAUSED
    calls = {t.tool_args["city"]: t.tool_call_id for t in (await rp.get_run(run.run_id)).tools}
    decisions: dict[str, Decision] = {
        calls["Paris"]: True,
        calls["Tokyo"]: False,
        calls["Lagos"]: BOOKED_BY_PHONE,
    }
    return run.run_id, decisions


def bookings(counter: Path) -> list[str]:
    return counter.read_text().split()


async def assert_applied(rp: Runpoint, run_id: str, counter: Path) -> None:
    run = await until(rp, run_id, RunStatus.COMPLETED, RunStatus.PAUSED)
    assert run.status is RunStatus.COMPLETED
    results = {t.tool_args["city"]: t.result for t in (await rp.get_run(run_id)).tools}
    assert results == {"Paris": "Paris: booked", "Tokyo": REJECTED, "Lagos": BOOKED_BY_PHONE}
    assert bookings(counter) == ["Paris"]


async def test_decisions_outlive_the_process_that_accepted_them(
    database: str, counter: Path
) -> None:
    async with Runpoint([deciding.agent], database=database, lease_seconds=0.5) as rp:
        run_id, decisions = await paused(rp)
        # another process accepts the decisions and dies before it applies any
        await deciding.kill(database, run_id, decisions, "accepted")
        await assert_applied(rp, run_id, counter)  # this process's lease watch resumes it
        assert (await rp.get_run(run_id)).run.recoveries == 1


async def test_a_decision_to_book_books_once_even_if_its_process_dies_booking(
    database: str, counter: Path
) -> None:
    async with Runpoint([deciding.agent], database=database, lease_seconds=0.5) as rp:
        run_id, decisions = await paused(rp)
        await deciding.kill(database, run_id, decisions, "mid-call")  # inside Paris's booking
        [paris] = [call for call, decision in decisions.items() if decision is True]
        resumed = await until(rp, run_id, RunStatus.PAUSED, RunStatus.COMPLETED)
        # the approval was spent when the booking began; whether it ended, a person says
        assert (resumed.status, resumed.in_doubt) == (RunStatus.PAUSED, [paris])
        assert bookings(counter) == ["Paris"]
        # the other decisions were kept: only the call in doubt needs a new one
        await rp.continue_run(ContinueRun(run_id=run_id, tools={paris: "Paris: booked"}))
        await assert_applied(rp, run_id, counter)


@ON_POSTGRES
async def test_decisions_sent_through_the_run_queue_survive_a_job_nobody_takes(
    database: str, counter: Path
) -> None:
    options = {"lease_seconds": 0.5, "execute_queued": False}  # no process takes the job
    async with Runpoint([deciding.agent], database=database, **options) as rp:  # type: ignore[arg-type]
        run_id, decisions = await paused(rp)
        handle = await rp.continue_run(ContinueRun(run_id=run_id, tools=decisions, background=True))
        assert handle.run.status is RunStatus.PENDING
        await assert_applied(rp, run_id, counter)  # the lease watch took the run
        assert (await rp.get_run(run_id)).run.recoveries == 1
    async with Runpoint([deciding.agent], database=database):  # the job, delivered late
        async with asyncio.timeout(30):
            while await jobs_in_queue(database):  # noqa: ASYNC110 (polls the database)
                await asyncio.sleep(0.05)
    assert bookings(counter) == ["Paris"]
