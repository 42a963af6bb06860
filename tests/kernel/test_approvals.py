"""Approvals: a paused run's calls as an inbox item, resolved as a continue with `tools`
would decide them, expired as their agent says; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from runpoint import hookimpl
from runpoint.core import tenancy
from runpoint.core.errors import Conflict, InvalidArguments, NotFound
from runpoint.core.tenancy import Principal
from runpoint.core.types import Approval, ApprovalQuery, Run, RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.runs.approvals import EXPIRED, MOVED_ON
from runpoint.seams.host import PluginHost

Open = Callable[..., Awaitable[Runpoint]]


class Told:
    def __init__(self) -> None:
        self.approvals: list[Approval] = []

    @hookimpl
    def runpoint_approval_requested(self, approval: Approval, run: Run) -> None:
        assert run.status is RunStatus.PAUSED and run.run_id == approval.run_id
        self.approvals.append(approval)


@pytest.fixture
async def told() -> Told:
    return Told()


@pytest.fixture
async def open_rp(database: str, told: Told) -> AsyncIterator[Open]:
    opened: list[Runpoint] = []

    async def open_(**agent_options: object) -> Runpoint:
        changed = [dataclasses.replace(a, **agent_options) for a in agents]  # type: ignore[arg-type]
        rp = Runpoint(changed, database=database, host=PluginHost([told]), lease_seconds=0.3)
        opened.append(await rp.open())
        return rp

    yield open_
    for rp in opened:
        await rp.close()


async def paused(rp: Runpoint, city: str = "Paris") -> Approval:
    run = await (
        await rp.create_run(CreateRun(agent_id="booking-agent", message=f"Book {city}"))
    ).result()
    assert run.status is RunStatus.PAUSED
    [approval], total = await rp.approvals.list(
        ApprovalQuery(team_id="", run_id=run.run_id), limit=10, offset=0
    )
    assert total == 1
    return approval


async def settled_run(rp: Runpoint, run_id: str) -> Run:
    for _ in range(200):
        run = await rp.queries.run(run_id)
        if run.status not in (RunStatus.PENDING, RunStatus.RUNNING, RunStatus.PAUSED):
            return run
        await asyncio.sleep(0.02)
    raise AssertionError(f"run {run_id} did not end")


async def test_a_pause_is_an_approval_and_plugins_are_told(open_rp: Open, told: Told) -> None:
    rp = await open_rp()
    approval = await paused(rp)
    assert approval.status == "pending" and approval.pause_type == "confirmation"
    [call] = approval.calls
    assert (call.tool_name, call.tool_args) == ("book_trip", {"city": "Paris"})
    assert approval.expires_at is None
    assert [a.id for a in told.approvals] == [approval.id]
    assert await rp.approvals.count() == 1
    assert (await rp.approvals.get(approval.id)).run_id == approval.run_id


async def test_resolving_approves_and_resumes_the_run(open_rp: Open) -> None:
    rp = await open_rp()
    approval = await paused(rp)
    with tenancy.acting_as(Principal("default", "ana")):
        settled = await rp.approvals.resolve(approval.id, "approved", "spoofed")
    assert (settled.status, settled.resolved_by) == ("approved", "ana")
    assert settled.resolved_at is not None
    run = await settled_run(rp, approval.run_id)
    assert run.status is RunStatus.COMPLETED
    [tool] = (await rp.get_run(approval.run_id)).tools
    assert tool.result == "Booked a trip to Paris."
    with pytest.raises(Conflict):
        await rp.approvals.resolve(approval.id, "rejected", None)
    assert await rp.approvals.count() == 0


async def test_edited_arguments_and_a_rejection_note_apply_as_continue_does(open_rp: Open) -> None:
    rp = await open_rp()
    edited = await paused(rp)
    with pytest.raises(InvalidArguments, match=r"arguments\.town is not a parameter"):
        await rp.approvals.resolve(edited.id, "approved", None, {"tool_args": {"town": "Rome"}})
    assert (await rp.approvals.get(edited.id)).status == "pending"  # nothing applied
    await rp.approvals.resolve(edited.id, "approved", "bo", {"tool_args": {"city": "Rome"}})
    await settled_run(rp, edited.run_id)
    [tool] = (await rp.get_run(edited.run_id)).tools
    assert (tool.tool_args, tool.result) == ({"city": "Rome"}, "Booked a trip to Rome.")

    rejected = await paused(rp, "Tokyo")
    settled = await rp.approvals.resolve(rejected.id, "rejected", "bo", {"note": "too cold"})
    assert settled.resolution_data == {"note": "too cold"}
    await settled_run(rp, rejected.run_id)
    [tool] = (await rp.get_run(rejected.run_id)).tools
    assert tool.tool_call_error and tool.result is not None and "too cold" in tool.result

    answered = await paused(rp, "Lima")
    await rp.approvals.resolve(answered.id, "approved", "bo", {"result": "booked by phone"})
    await settled_run(rp, answered.run_id)
    [tool] = (await rp.get_run(answered.run_id)).tools
    assert tool.result == "booked by phone"


async def test_bad_resolutions_are_refused_before_anything(open_rp: Open) -> None:
    rp = await open_rp()
    approval = await paused(rp)
    with pytest.raises(InvalidArguments, match="status"):
        await rp.approvals.resolve(approval.id, "maybe", None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArguments, match="resolution_data"):
        await rp.approvals.resolve(approval.id, "rejected", None, {"tool_args": {}})
    with pytest.raises(NotFound):
        await rp.approvals.resolve("nope", "approved", None)
    assert (await rp.queries.run(approval.run_id)).status is RunStatus.PAUSED


async def test_a_run_that_went_on_without_its_approval_is_a_conflict(open_rp: Open) -> None:
    rp = await open_rp()
    approval = await paused(rp)
    call = approval.calls[0].tool_call_id
    await (await rp.continue_run(ContinueRun(run_id=approval.run_id, tools={call: True}))).result()
    with pytest.raises(Conflict):
        await rp.approvals.resolve(approval.id, "approved", None)


async def test_only_its_team_sees_and_decides_it(open_rp: Open) -> None:
    rp = await open_rp()
    approval = await paused(rp)
    with tenancy.acting_as(Principal("other")):
        assert await rp.approvals.count() == 0
        assert await rp.approvals.list(ApprovalQuery(team_id=""), limit=5, offset=0) == ([], 0)
        with pytest.raises(NotFound):
            await rp.approvals.resolve(approval.id, "approved", None)
        with pytest.raises(NotFound):
            await rp.approvals.delete(approval.id)
    await rp.approvals.delete(approval.id)
    with pytest.raises(NotFound):
        await rp.approvals.get(approval.id)


async def test_filters_and_pages(open_rp: Open) -> None:
    rp = await open_rp()
    first, second, third = [await paused(rp, c) for c in ("Paris", "Tokyo", "Lagos")]
    await rp.approvals.resolve(second.id, "approved", None)
    page, total = await rp.approvals.list(ApprovalQuery(team_id=""), limit=2, offset=0)
    assert total == 3 and [a.id for a in page] == [third.id, second.id]
    page, _ = await rp.approvals.list(ApprovalQuery(team_id=""), limit=2, offset=2)
    assert [a.id for a in page] == [first.id]
    pending = ApprovalQuery(team_id="", status="pending", agent_id="booking-agent")
    page, total = await rp.approvals.list(pending, limit=10, offset=0)
    assert total == 2 and {a.id for a in page} == {first.id, third.id}


async def test_an_expired_approval_rejects_its_calls_with_a_reason(open_rp: Open) -> None:
    rp = await open_rp(approval_timeout=0.2)
    approval = await paused(rp)
    assert approval.expires_at is not None
    run = await settled_run(rp, approval.run_id)  # the lease watch's beat settles it
    assert run.status is RunStatus.COMPLETED
    [tool] = (await rp.get_run(approval.run_id)).tools
    assert tool.tool_call_error and tool.result is not None and EXPIRED in tool.result
    expired = await rp.approvals.get(approval.id)
    assert expired.status == "expired" and expired.resolution_data == {
        "action": "reject",
        "reason": EXPIRED,
    }


async def test_an_expired_approval_can_cancel_the_run(open_rp: Open) -> None:
    rp = await open_rp(approval_timeout=0.2, approval_expiry="cancel")
    approval = await paused(rp)
    run = await settled_run(rp, approval.run_id)
    assert run.status is RunStatus.CANCELLED
    for _ in range(100):
        if (await rp.approvals.get(approval.id)).status == "expired":
            break
        await asyncio.sleep(0.02)
    assert (await rp.approvals.get(approval.id)).status == "expired"


async def test_an_approval_whose_run_went_on_without_it_is_cancelled(open_rp: Open) -> None:
    rp = await open_rp()
    continued, cancelled, waiting = [await paused(rp, c) for c in ("Paris", "Tokyo", "Lagos")]
    call = continued.calls[0].tool_call_id
    await (await rp.continue_run(ContinueRun(run_id=continued.run_id, tools={call: True}))).result()
    await rp.cancel(cancelled.run_id)
    assert await rp.approvals.count() == 3
    assert await rp.approvals.settle_stale() == 0, "a resolve may be between its two writes"
    assert await rp.approvals.settle_stale(still_for=0) == 2
    assert await rp.approvals.count() == 1
    for approval, status in ((continued, "COMPLETED"), (cancelled, "CANCELLED")):
        left = await rp.approvals.get(approval.id)
        assert left.status == "cancelled" and left.resolution_data == {
            "reason": MOVED_ON,
            "run_status": status,
        }
        with pytest.raises(Conflict):
            await rp.approvals.resolve(approval.id, "approved", None)
    assert (await rp.approvals.get(waiting.id)).status == "pending"


async def test_a_deleted_session_takes_its_approvals(open_rp: Open) -> None:
    rp = await open_rp()
    approval = await paused(rp)
    await rp.delete_session(approval.session_id)
    with pytest.raises(NotFound):
        await rp.approvals.get(approval.id)
    assert await rp.approvals.count() == 0
