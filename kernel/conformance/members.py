"""Checks of a run tree: a crew run's members are runs of their own, linked to it in their
rows, and kept out of their session's live history."""

from __future__ import annotations

from runpoint.conformance import build
from runpoint.conformance.suite import Capability, check
from runpoint.core.types import Message, RunStatus, now
from runpoint.seams.storage import Storage


@check(Capability.RUNS)
async def a_member_run_reads_back_linked_to_its_crew_run(store: Storage) -> None:
    session, crew = await build.started(store, [Message(role="user", content="Plan it")])
    members = [
        build.run(
            session,
            status=RunStatus.RUNNING,
            parent_run_id=crew.run_id,
            parent_tool_call_id=f"call-{i}",
            input=f"task {i}",
            message_count=1,
        )
        for i in range(2)
    ]
    await store.create_runs(
        members, {m.run_id: [Message(role="user", content=m.input)] for m in members}
    )
    got = [
        (r.run_id, r.parent_run_id, r.parent_tool_call_id)
        for r in await store.member_runs(crew.run_id)
    ]
    assert got == [(m.run_id, crew.run_id, f"call-{i}") for i, m in enumerate(members)], got
    first = await store.get_run(members[0].run_id)
    assert first is not None and first.parent_tool_call_id == "call-0"
    assert await store.member_runs(members[0].run_id) == []


@check(Capability.RUNS)
async def member_runs_are_not_their_sessions_history(store: Storage) -> None:
    session, crew = await build.started(store)
    member = build.run(session, parent_run_id=crew.run_id, parent_tool_call_id="call-1")
    await store.create_runs([member])
    assert [r.run_id for r in await store.list_runs(session.session_id)] == [crew.run_id]
    # the session's next run follows the crew run, not its member
    after = await store.start_in_session(build.run(session))
    assert after.previous_run_id == crew.run_id


@check(Capability.LEASES)
async def expired_runs_leave_member_runs_to_their_leaders(store: Storage) -> None:
    """A member run is resumed by its crew run's execution (its delegation, run again),
    never on its own; and a crowd of members whose lease ran out must not hide a crew run
    whose lease did."""
    session, past = build.session(), now() - 1
    crew = build.run(session, status=RunStatus.RUNNING, lease_owner="gone", lease_expires_at=past)
    members = [
        build.run(
            session,
            status=RunStatus.RUNNING,
            lease_owner="gone",
            lease_expires_at=past - 100 - i,
            parent_run_id=crew.run_id,
            parent_tool_call_id=f"call-{i}",
        )
        for i in range(25)
    ]
    await store.create_sessions([session], [crew, *members])
    found = await store.expired_runs(now(), [session.agent_id])
    assert [r.run_id for r in found] == [crew.run_id], [r.run_id for r in found]


@check(Capability.LEASES)
async def expired_runs_give_the_member_runs_their_crew_run_ended_without(
    store: Storage,
) -> None:
    """A member run in flight whose crew run ended was left behind (its process died, or
    its leader went on without it): nobody would resume it, so it is found, to be settled;
    those of a crew run that goes on (PAUSED included) are not."""
    session, past = build.session(), now() - 1
    crews = {
        status: build.run(session, status=status, lease_owner="gone", lease_expires_at=past)
        for status in (RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.PAUSED)
    }
    members = {
        status: build.run(
            session,
            status=RunStatus.RUNNING,
            lease_owner="gone",
            lease_expires_at=past,
            parent_run_id=crew.run_id,
            parent_tool_call_id="call-1",
        )
        for status, crew in crews.items()
    }
    await store.create_sessions([session], [*crews.values(), *members.values()])
    found = {r.run_id for r in await store.expired_runs(now(), [session.agent_id])}
    left = {members[RunStatus.COMPLETED].run_id, members[RunStatus.CANCELLED].run_id}
    assert found == left, found
