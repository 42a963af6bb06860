"""Checks of session checkpoints: a lease while PENDING, a capture once READY, keyset
pages."""

from __future__ import annotations

import msgspec

from runpoint.conformance import build
from runpoint.conformance.suite import Capability, check
from runpoint.core.types import Lease, SessionCapture, SessionCheckpointStatus, now
from runpoint.seams.storage import Storage

SESSION_CHECKPOINTS = Capability.SESSION_CHECKPOINTS
READY, FAILED = SessionCheckpointStatus.READY, SessionCheckpointStatus.FAILED


@check(SESSION_CHECKPOINTS)
async def a_session_checkpoint_reads_back_as_it_was_added(store: Storage) -> None:
    session, _ = await build.started(store)
    checkpoint = build.session_checkpoint(session)
    checkpoint.label, checkpoint.kind = "before the big change", "auto"
    await store.add_session_checkpoint(checkpoint)
    assert await store.get_session_checkpoint(checkpoint.checkpoint_id) == checkpoint
    assert await store.session_capture(checkpoint.checkpoint_id) is None


@check(SESSION_CHECKPOINTS)
async def its_owner_makes_it_ready_with_its_capture_once(store: Storage) -> None:
    session, run = await build.started(store, build.messages(1))
    pending = build.session_checkpoint(session, "me")
    await store.add_session_checkpoint(pending)
    capture = SessionCapture(session, [run], {"sandbox": b"\x00files"})
    ready = msgspec.structs.replace(pending, status=READY, size_bytes=42, lease=None)
    assert await store.update_session_checkpoint(ready, msgspec.json.encode(capture), "me")
    assert await store.get_session_checkpoint(pending.checkpoint_id) == ready
    assert await store.session_capture(pending.checkpoint_id) == capture
    failed = msgspec.structs.replace(ready, status=FAILED)
    assert not await store.update_session_checkpoint(failed, None, "me"), "rewrote a READY one"
    assert await store.get_session_checkpoint(pending.checkpoint_id) == ready


@check(SESSION_CHECKPOINTS)
async def its_lease_keeps_others_out_until_it_runs_out(store: Storage) -> None:
    session, _ = await build.started(store)
    held, lapsed = build.session_checkpoint(session), build.session_checkpoint(session, seconds=-1)
    for checkpoint in (held, lapsed):
        await store.add_session_checkpoint(checkpoint)
    renewed = msgspec.structs.replace(held, lease=Lease("me", now() + 120))
    assert await store.update_session_checkpoint(renewed, None, "me")
    failed = msgspec.structs.replace(held, status=FAILED, lease=None)
    assert not await store.update_session_checkpoint(failed, None, "them")
    assert not await store.update_session_checkpoint(failed, None, None)
    assert await store.get_session_checkpoint(held.checkpoint_id) == renewed
    # a lease that ran out: anyone may settle it, `None` (no owner) included
    settled = msgspec.structs.replace(lapsed, status=FAILED, lease=None)
    assert await store.update_session_checkpoint(settled, None, None)
    assert await store.get_session_checkpoint(lapsed.checkpoint_id) == settled


@check(SESSION_CHECKPOINTS)
async def an_unknown_session_checkpoint_is_not_updated(store: Storage) -> None:
    session, _ = await build.started(store)
    assert not await store.update_session_checkpoint(build.session_checkpoint(session), None, "me")


@check(SESSION_CHECKPOINTS)
async def session_checkpoints_are_listed_newest_first_by_page(store: Storage) -> None:
    session, _ = await build.started(store)
    other, _ = await build.started(store)
    added = [build.session_checkpoint(session) for _ in range(5)]
    for checkpoint in added:
        await store.add_session_checkpoint(checkpoint)
        await store.add_session_checkpoint(build.session_checkpoint(other))
    newest_first = [c.checkpoint_id for c in reversed(added)]
    pages: list[str] = []
    before = None
    while page := await store.list_session_checkpoints(session.session_id, limit=2, before=before):
        positions = [position for position, _ in page]
        assert positions == sorted(positions, reverse=True), positions
        pages += [c.checkpoint_id for _, c in page]
        before = positions[-1]
    assert pages == newest_first


@check(SESSION_CHECKPOINTS)
async def a_page_may_start_before_any_integer(store: Storage) -> None:
    """A client sends the position back as a page token: any integer is a valid one."""
    session, _ = await build.started(store)
    checkpoint = build.session_checkpoint(session)
    await store.add_session_checkpoint(checkpoint)
    listed = await store.list_session_checkpoints(session.session_id, limit=5, before=2**63 - 1)
    assert [c for _, c in listed] == [checkpoint]
    for before in (0, -(2**63)):
        assert (
            await store.list_session_checkpoints(session.session_id, limit=5, before=before) == []
        )


@check(SESSION_CHECKPOINTS)
async def a_deleted_session_checkpoint_is_gone(store: Storage) -> None:
    session, _ = await build.started(store)
    kept, deleted = build.session_checkpoint(session), build.session_checkpoint(session)
    for checkpoint in (kept, deleted):
        await store.add_session_checkpoint(checkpoint)
    await store.delete_session_checkpoint(deleted.checkpoint_id)
    assert await store.get_session_checkpoint(deleted.checkpoint_id) is None
    listed = await store.list_session_checkpoints(session.session_id, limit=5, before=None)
    assert [c for _, c in listed] == [kept]
