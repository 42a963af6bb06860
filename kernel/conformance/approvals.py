"""Checks of approvals and their runs: an approval goes with its run (a retention removal,
a session deleted), and one whose run left its pause by another route is stale."""

from __future__ import annotations

from runpoint.conformance import build
from runpoint.conformance.suite import Capability, check
from runpoint.core.types import Approval, Run, RunStatus, WaitingCall
from runpoint.seams.storage import Storage


async def _approval(store: Storage, run: Run, call: str = "call") -> Approval:
    approval = Approval.of(run, [WaitingCall(call, "book", {"city": "Paris"})], None)
    assert await store.add_approval(approval)
    return approval


@check(Capability.RETENTION)
async def a_removed_run_takes_its_approvals(store: Storage) -> None:
    _, run = await build.started(store, build.messages(2))
    approval = await _approval(store, run)
    assert (await store.remove_runs([run.run_id])).runs == 1
    assert await store.get_approval(approval.id) is None


@check(Capability.SESSIONS)
async def a_deleted_session_takes_its_approvals(store: Storage) -> None:
    session, run = await build.started(store, build.messages(2), status=RunStatus.PAUSED)
    approval = await _approval(store, run)
    assert await store.delete_sessions([session.session_id])
    assert await store.get_approval(approval.id) is None


@check(Capability.RUNS)
async def an_approval_whose_run_left_its_pause_is_stale(store: Storage) -> None:
    _, waiting = await build.started(store, build.messages(2), status=RunStatus.PAUSED)
    _, cancelled = await build.started(store, build.messages(2), status=RunStatus.PAUSED)
    _, again = await build.started(store, build.messages(2), status=RunStatus.PAUSED)
    kept = await _approval(store, waiting)
    left = await _approval(store, cancelled)
    first = await _approval(store, again, "first")
    second = await _approval(store, again, "second")  # paused again, on another call
    cancelled.cancel()
    await store.save(cancelled, [], None)
    ours = {kept.id, left.id, first.id, second.id}
    stale = [a.id for a in await store.stale_approvals(1000) if a.id in ours]
    assert sorted(stale) == sorted([left.id, first.id]), stale
    assert await store.settle_approval(left.id, "cancelled", None, None)
    assert left.id not in {a.id for a in await store.stale_approvals(1000)}, "settled: not stale"
