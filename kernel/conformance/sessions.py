"""Checks of sessions: inserts, names and lists, the run at their head, deletion, locks and
rollbacks (whose lease says who carries them out)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import msgspec

from runpoint.conformance import build
from runpoint.conformance.suite import Capability, check
from runpoint.core.errors import Conflict, Locked
from runpoint.core.types import Lease, Rollback, RunStatus, now
from runpoint.seams.storage import Storage

SESSIONS, LOCKS, ROLLBACK = Capability.SESSIONS, Capability.LOCKS, Capability.ROLLBACK


async def refused(call: Awaitable[object], error: type[Exception]) -> None:
    try:
        await call
    except error:
        return
    raise AssertionError(f"expected {error.__name__}")


def rollback(owner: str = "me", seconds: float = 60, checkpoint_id: str = "c") -> Rollback:
    return Rollback(checkpoint_id, Lease(owner, now() + seconds))


@check(SESSIONS)
async def a_session_reads_back_as_it_was_created(store: Storage) -> None:
    source = build.session()
    session = build.session(
        team_id=build.fresh("team"),
        user_id="ada",
        session_name="Trip to Kyoto",
        forked_from_session_id=source.session_id,
        event_seq=7,
    )
    await store.create_sessions([source, session])
    assert await store.get_session(session.session_id) == session
    assert await store.get_session(source.session_id) == source


@check(SESSIONS)
async def rename_session_names_a_session_or_takes_its_name_away(store: Storage) -> None:
    team = build.fresh("team")
    session = build.session(team_id=team)
    await store.create_sessions([session])
    assert await store.rename_session(session.session_id, "Trip to Lima")
    renamed = msgspec.structs.replace(session, session_name="Trip to Lima")
    assert await store.get_session(session.session_id) == renamed
    assert await store.list_sessions(team_id=team, limit=1, offset=0) == [renamed]
    assert await store.rename_session(session.session_id, None)
    assert await store.get_session(session.session_id) == session
    assert not await store.rename_session(build.fresh("session"), "Nowhere")


@check(SESSIONS)
async def create_sessions_is_all_or_nothing_and_a_conflict_when_an_id_is_taken(
    store: Storage,
) -> None:
    taken, _ = await build.started(store)
    new = build.session()
    run = build.run(new, message_count=1)
    await refused(
        store.create_sessions([new, taken], [run], {run.run_id: build.messages(1)}), Conflict
    )
    assert await store.get_session(new.session_id) is None
    assert await store.get_run(run.run_id) is None


@check(SESSIONS)
async def list_sessions_lists_a_teams_sessions_newest_first(store: Storage) -> None:
    team, start = build.fresh("team"), now()
    sessions = [build.session(team_id=team, created_at=start + i) for i in range(5)]
    await store.create_sessions([*sessions, build.session(created_at=start + 9)])
    newest_first = [s.session_id for s in reversed(sessions)]
    page = await store.list_sessions(team_id=team, limit=2, offset=1)
    assert [s.session_id for s in page] == newest_first[1:3]
    every = await store.list_sessions(team_id=team, limit=10, offset=0)
    assert [s.session_id for s in every] == newest_first


@check(SESSIONS)
async def first_inputs_are_those_of_each_sessions_first_run(store: Storage) -> None:
    talked, silent, empty = build.session(), build.session(), build.session()
    await store.create_sessions([talked, silent, empty])
    await store.start_in_session(build.run(talked, input="first"))
    await store.start_in_session(build.run(talked, input="second"))
    await store.start_in_session(build.run(silent))
    ids = [talked.session_id, silent.session_id, empty.session_id, build.fresh("none")]
    firsts = await store.first_inputs(ids)
    assert firsts == {talked.session_id: "first", silent.session_id: None}
    assert await store.first_inputs([]) == {}


@check(SESSIONS)
async def a_new_run_follows_the_sessions_newest_live_run(store: Storage) -> None:
    session = build.session()
    await store.create_sessions([session])
    first = await store.start_in_session(build.run(session))
    assert first.previous_run_id is None
    second = build.run(session, message_count=1)
    started = await store.start_in_session(second, build.messages(1))
    assert started.previous_run_id == first.run_id and started.revision == 1
    assert await store.get_run(second.run_id) == started
    assert await store.list_runs(session.session_id) == [first, started]


@check(SESSIONS)
async def no_new_run_starts_while_one_is_in_flight(store: Storage) -> None:
    session, busy = await build.started(store, status=RunStatus.RUNNING)
    waiting = build.run(session, message_count=1)
    await refused(store.start_in_session(waiting, build.messages(1)), Conflict)
    assert await store.get_run(waiting.run_id) is None
    assert await store.list_runs(session.session_id) == [busy]


@check(SESSIONS)
async def of_concurrent_new_runs_in_one_session_one_starts(store: Storage) -> None:
    session = build.session()
    await store.create_sessions([session])
    runs = [build.run(session, status=RunStatus.PENDING) for _ in range(3)]
    outcomes = await asyncio.gather(
        *(store.start_in_session(r) for r in runs), return_exceptions=True
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["Conflict", "Conflict", "Run"], outcomes
    assert len(await store.list_runs(session.session_id)) == 1


@check(SESSIONS)
async def delete_sessions_deletes_what_they_own(store: Storage) -> None:
    session, run = await build.started(store, build.messages(2))
    await build.append(store, run, [], build.checkpoint(run, 2))
    checkpoint = build.session_checkpoint(session)
    await store.add_session_checkpoint(checkpoint)
    other, other_run = await build.started(store)
    assert await store.delete_sessions([session.session_id, other.session_id])
    for gone, gone_run in ((session, run), (other, other_run)):
        assert await store.get_session(gone.session_id) is None
        assert await store.get_run(gone_run.run_id) is None
    assert await store.read_messages(run.segments, 2) == []
    assert await store.list_checkpoints(run.segments) == []
    assert await store.get_session_checkpoint(checkpoint.checkpoint_id) is None
    assert not await store.delete_sessions([session.session_id])


@check(SESSIONS)
async def delete_sessions_deletes_none_when_one_is_unknown(store: Storage) -> None:
    session, run = await build.started(store)
    assert not await store.delete_sessions([session.session_id, build.fresh("session")])
    assert await store.get_session(session.session_id) is not None
    assert await store.get_run(run.run_id) is not None


@check(SESSIONS)
async def delete_sessions_refuses_while_a_run_is_in_flight(store: Storage) -> None:
    idle, _ = await build.started(store)
    session, run = await build.started(store, status=RunStatus.PENDING)
    await refused(store.delete_sessions([idle.session_id, session.session_id]), Conflict)
    assert await store.get_run(run.run_id) is not None
    assert await store.get_session(idle.session_id) is not None


@check(LOCKS)
async def a_locked_session_starts_no_run_until_unlocked(store: Storage) -> None:
    session, _ = await build.started(store)
    assert await store.lock_session(session.session_id, "maintenance")
    got = await store.get_session(session.session_id)
    assert got is not None and got.locked == "maintenance"
    await refused(store.start_in_session(build.run(session)), Locked)
    await refused(store.lock_session(session.session_id, "maintenance"), Locked)
    assert await store.unlock_session(session.session_id)
    got = await store.get_session(session.session_id)
    assert got is not None and got.locked is None
    await store.start_in_session(build.run(session))


@check(LOCKS)
async def a_session_with_a_run_in_flight_is_not_locked(store: Storage) -> None:
    session, _ = await build.started(store, status=RunStatus.RUNNING)
    await refused(store.lock_session(session.session_id, "maintenance"), Conflict)
    got = await store.get_session(session.session_id)
    assert got is not None and got.locked is None


@check(LOCKS)
async def an_unknown_session_is_neither_locked_nor_unlocked(store: Storage) -> None:
    assert not await store.lock_session(build.fresh("session"), "maintenance")
    assert not await store.unlock_session(build.fresh("session"))


@check(ROLLBACK)
async def a_rollback_lock_carries_its_rollback(store: Storage) -> None:
    session, _ = await build.started(store)
    under_way = rollback()
    assert await store.lock_session(session.session_id, "rollback", under_way)
    got = await store.get_session(session.session_id)
    assert got is not None and (got.locked, got.rollback) == ("rollback", under_way)
    await store.unlock_session(session.session_id)
    got = await store.get_session(session.session_id)
    assert got is not None and (got.locked, got.rollback) == (None, None)


@check(ROLLBACK)
async def only_its_owner_lifts_a_rollback_until_its_lease_runs_out(store: Storage) -> None:
    session, _ = await build.started(store)
    await store.lock_session(session.session_id, "rollback", rollback("me"))
    assert not await store.unlock_session(session.session_id, "them")
    assert await store.unlock_session(session.session_id, "me")
    await store.lock_session(session.session_id, "rollback", rollback("me", seconds=-1))
    assert await store.unlock_session(session.session_id, "them")
    await store.lock_session(session.session_id, "maintenance")
    assert not await store.unlock_session(session.session_id, "me"), "lifted a maintenance"


@check(ROLLBACK)
async def hold_rollback_renews_its_owners_lease_or_takes_over_one_that_ran_out(
    store: Storage,
) -> None:
    session, _ = await build.started(store)
    await store.lock_session(session.session_id, "rollback", rollback("me", seconds=-1))
    # "them" takes over the lapsed lease, then renews it
    for renewed in (rollback("them", 90), rollback("them", 120)):
        assert await store.hold_rollback(session.session_id, renewed)
        got = await store.get_session(session.session_id)
        assert got is not None and got.rollback == renewed


@check(ROLLBACK)
async def hold_rollback_refuses_another_owner_another_checkpoint_or_no_rollback(
    store: Storage,
) -> None:
    session, _ = await build.started(store)
    assert not await store.hold_rollback(session.session_id, rollback())
    held = rollback("me")
    await store.lock_session(session.session_id, "rollback", held)
    assert not await store.hold_rollback(session.session_id, rollback("them"))
    assert not await store.hold_rollback(session.session_id, rollback("me", checkpoint_id="d"))
    got = await store.get_session(session.session_id)
    assert got is not None and got.rollback == held


@check(ROLLBACK)
async def rollback_session_hides_the_live_runs_and_inserts_their_replacements(
    store: Storage,
) -> None:
    session, old = await build.started(store, build.messages(2))
    await store.lock_session(session.session_id, "rollback", rollback("me"))
    cursor = (await store.get_session(session.session_id)).event_seq  # type: ignore[union-attr]
    back = build.fork(old, 1)
    assert await store.rollback_session(session.session_id, [back], "me")
    assert await store.list_runs(session.session_id) == [back]
    hidden = await store.get_run(old.run_id)
    assert hidden is not None and hidden.hidden, "a rolled back run must stay readable"
    got = await store.get_session(session.session_id)
    assert got is not None and (got.locked, got.event_seq) == (None, cursor + 1)
    after = await store.start_in_session(build.run(session))
    assert after.previous_run_id == back.run_id


@check(ROLLBACK)
async def rollback_session_writes_nothing_for_another_owner(store: Storage) -> None:
    session, old = await build.started(store)
    await store.lock_session(session.session_id, "rollback", rollback("me"))
    back = build.fork(old, 0)
    assert not await store.rollback_session(session.session_id, [back], "them")
    assert await store.list_runs(session.session_id) == [old]
    assert await store.get_run(back.run_id) is None
    got = await store.get_session(session.session_id)
    assert got is not None and got.locked == "rollback"
