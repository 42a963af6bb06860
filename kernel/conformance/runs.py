"""Checks of runs: inserts, one writer per run (`save`'s revision), cancel flags, leases
and the records of side-effecting tool calls."""

from __future__ import annotations

import asyncio

import msgspec

from runpoint.conformance import build
from runpoint.conformance.suite import Capability, check
from runpoint.core.errors import Conflict, Locked
from runpoint.core.types import Message, RunStatus, Segment, Usage, now
from runpoint.seams.storage import Storage

RUNS, LEASES, TOOL_RECORDS = Capability.RUNS, Capability.LEASES, Capability.TOOL_RECORDS


@check(RUNS)
async def a_run_reads_back_as_it_was_inserted(store: Storage) -> None:
    session = build.session(user_id="ada")
    source = build.run(session)
    run = build.run(
        session,
        status=RunStatus.PAUSED,
        user_id="ada",
        input="Book Lima",
        content="Shall I?",
        model="scripted:demo",
        policy="tool-batch",
        previous_run_id=source.run_id,
        usage=Usage(10, 20),
        in_doubt=["call-1"],
        decisions={"call-2": True, "call-3": "done by hand"},
        lease_owner="worker-1",
        lease_expires_at=now() + 60,
        recoveries=2,
    )
    await store.create_sessions([session], [source, run])
    got = await store.get_run(run.run_id)
    assert got == run, build.diff(got, run)


@check(RUNS)
async def unknown_ids_read_as_nothing(store: Storage) -> None:
    assert await store.get_run(build.fresh("run")) is None
    assert await store.get_session(build.fresh("session")) is None
    assert await store.list_runs(build.fresh("session")) == []
    assert await store.get_session_checkpoint(build.fresh("checkpoint")) is None
    assert await store.session_capture(build.fresh("checkpoint")) is None


@check(RUNS)
async def create_runs_is_all_or_nothing_when_an_id_is_taken(store: Storage) -> None:
    session, taken = await build.started(store)
    new = build.run(session)
    try:
        await store.create_runs([new, build.run(session, run_id=taken.run_id)])
    except Exception:  # the protocol names no error for it
        pass
    else:
        raise AssertionError("a run whose id is taken was inserted")
    assert await store.get_run(new.run_id) is None, "half of the runs were inserted"


@check(RUNS)
async def create_runs_in_a_locked_session_is_locked_and_writes_nothing(store: Storage) -> None:
    session, source = await build.started(store, build.messages(2))
    await store.lock_session(session.session_id, "maintenance")
    fork = build.fork(source, 1, message_count=2)
    try:
        await store.create_runs([fork], {fork.run_id: build.messages(1, "fork")})
    except Locked:
        pass
    else:
        raise AssertionError("a run was inserted in a locked session")
    assert await store.get_run(fork.run_id) is None
    assert await store.read_messages([Segment(fork.run_id, 1)], 2) == []


@check(RUNS)
async def a_run_is_born_with_its_incoming_messages_as_a_save_would_write_them(
    store: Storage,
) -> None:
    session, source = await build.started(store, build.messages(2))
    assert source.revision == 1, "the insert's save did not bump the caller's run"
    fork = build.fork(source, 1, message_count=3)
    new = build.messages(2, "fork")
    await store.create_runs([fork], {fork.run_id: new})
    stored = await store.get_run(fork.run_id)
    assert stored is not None and (stored.revision, fork.revision) == (1, 1)
    assert await build.transcript(store, fork) == build.messages(2)[:1] + new
    # each input took a place per message and one for its boundary
    got = await store.get_session(session.session_id)
    assert got is not None and got.event_seq == 3 + 3, f"event_seq {got and got.event_seq}"
    await store.save(fork, [], None)  # its writer goes on from there


@check(RUNS)
async def what_a_caller_changes_is_not_what_is_stored(store: Storage) -> None:
    """Structs go in and out as copies, as they would through a database."""
    incoming = build.messages(1)
    _, run = await build.started(store, incoming)
    stored = msgspec.json.encode(await store.get_run(run.run_id))
    for changed in (run, await store.get_run(run.run_id)):
        assert changed is not None
        changed.decisions["call"] = True
        changed.segments.append(Segment("elsewhere", 5))
        changed.usage.input_tokens = 99
    incoming[0].content = "changed"
    (await build.transcript(store, run))[0].content = "changed"
    assert msgspec.json.encode(await store.get_run(run.run_id)) == stored
    assert await build.transcript(store, run) == build.messages(1)


@check(RUNS)
async def save_bumps_the_revision_and_writes_the_run(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1), status=RunStatus.RUNNING)
    run = msgspec.structs.replace(
        run,
        status=RunStatus.PAUSED,
        content="Shall I book?",
        error=None,
        model="scripted:other",
        usage=Usage(5, 7),
        in_doubt=["call-1"],
        decisions={"call-1": False},
        last_checkpoint_at_message_index=2,
        lease_owner="worker-2",
        lease_expires_at=now() + 30,
        recoveries=1,
        updated_at=now(),
    )
    await build.append(store, run, build.messages(2, "more"))
    assert run.revision == 2
    got = await store.get_run(run.run_id)
    assert got == run, build.diff(got, run)


@check(RUNS)
async def save_with_a_stale_revision_is_a_conflict_and_writes_nothing(store: Storage) -> None:
    session, run = await build.started(store, build.messages(1))
    stale = await store.get_run(run.run_id)
    assert stale is not None
    await build.append(store, run, [])
    before = await store.get_session(session.session_id)
    stale = msgspec.structs.replace(stale, message_count=2, status=RunStatus.ERROR)
    try:
        await store.save(
            stale, build.messages(1, "stale"), build.checkpoint(stale, 2), intents=["call-stale"]
        )
    except Conflict:
        pass
    else:
        raise AssertionError("a save with a stale revision was written")
    assert stale.revision == 1, "a refused save bumped its run's revision"
    assert await store.get_run(run.run_id) == run
    assert await store.read_messages([Segment(run.run_id, 0)], 2) == build.messages(1)
    assert await store.list_checkpoints(run.segments) == []
    assert await store.tool_records(run.run_id, ["call-stale"]) == {}
    assert await store.get_session(session.session_id) == before, "the event log moved on"


@check(RUNS)
async def of_two_concurrent_writers_one_wins(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    first, second = await store.get_run(run.run_id), await store.get_run(run.run_id)
    assert first is not None and second is not None
    outcomes = await asyncio.gather(
        *(store.save(writer, [], None) for writer in (first, second)), return_exceptions=True
    )
    assert sorted(type(o).__name__ for o in outcomes) == ["Conflict", "NoneType"], outcomes


@check(RUNS)
async def a_cancel_is_flagged_on_a_run_in_flight_only(store: Storage) -> None:
    _, done = await build.started(store)
    assert not await store.request_cancel(done.run_id)
    assert not await store.request_cancel(build.fresh("run"))
    _, running = await build.started(store, status=RunStatus.RUNNING)
    assert await store.request_cancel(running.run_id)
    got = await store.get_run(running.run_id)
    assert got is not None and got.cancel_requested


@check(RUNS)
async def save_reads_the_cancel_flag_back_and_keeps_it(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1), status=RunStatus.RUNNING)
    await store.request_cancel(run.run_id)
    assert not run.cancel_requested
    await build.append(store, run, build.messages(1, "next"))
    assert run.cancel_requested, "save did not read the flag back"
    run = msgspec.structs.replace(run, cancel_requested=False)  # a writer does not lift it
    await build.append(store, run, [])
    got = await store.get_run(run.run_id)
    assert got is not None and got.cancel_requested and run.cancel_requested


@check(LEASES)
async def renew_leases_extends_the_owners_runs_in_flight_only(store: Storage) -> None:
    soon, later = now() + 5, now() + 500
    mine = [
        (await build.started(store, status=s, lease_owner="me", lease_expires_at=soon))[1]
        for s in (RunStatus.RUNNING, RunStatus.PENDING, RunStatus.COMPLETED)
    ]
    _, theirs = await build.started(
        store, status=RunStatus.RUNNING, lease_owner="them", lease_expires_at=soon
    )
    await store.renew_leases("me", [r.run_id for r in [*mine, theirs]], later)
    expires = [
        got.lease_expires_at for r in [*mine, theirs] if (got := await store.get_run(r.run_id))
    ]
    assert expires == [later, later, soon, soon], expires


@check(LEASES)
async def expired_runs_are_the_runs_in_flight_whose_lease_ran_out(store: Storage) -> None:
    session = build.session()
    agent, past, future = session.agent_id, now() - 10, now() + 60
    expired = [
        build.run(session, status=RunStatus.RUNNING, lease_owner="gone", lease_expires_at=past),
        build.run(session, status=RunStatus.PENDING, lease_owner="gone", lease_expires_at=past),
    ]
    others = [
        build.run(session, status=RunStatus.RUNNING, lease_owner="here", lease_expires_at=future),
        build.run(session, status=RunStatus.COMPLETED, lease_owner="gone", lease_expires_at=past),
    ]
    await store.create_sessions([session], [*expired, *others])
    found = await store.expired_runs(now(), [agent])
    assert sorted(r.run_id for r in found) == sorted(r.run_id for r in expired)
    assert await store.expired_runs(now(), [build.fresh("agent")]) == []


@check(LEASES)
async def expired_runs_are_those_of_the_agents_asked_even_among_many_others(
    store: Storage,
) -> None:
    """Runs of agents a process does not serve must not hide its own (issue 13, item 8)."""
    crowd, own = build.session(), build.session()
    others = [
        build.run(crowd, status=RunStatus.RUNNING, lease_expires_at=now() - 100 - i)
        for i in range(25)
    ]
    mine = build.run(own, status=RunStatus.RUNNING, lease_expires_at=now() - 1)
    await store.create_sessions([crowd, own], [*others, mine])
    found = await store.expired_runs(now(), [own.agent_id])
    assert [r.run_id for r in found] == [mine.run_id]


@check(TOOL_RECORDS)
async def intents_are_recorded_with_their_save(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    turn = build.tool_turn("call-1")
    run.count_appended(run.message_count + 1, None)
    await store.save(run, turn[:1], None, intents=["call-1"])
    assert await store.tool_records(run.run_id, ["call-1", "call-2"]) == {"call-1": None}
    assert await store.tool_records(run.run_id, []) == {}


@check(TOOL_RECORDS)
async def a_recorded_call_reads_back_its_result(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    turn = build.tool_turn("call-1")
    run.count_appended(run.message_count + 1, None)
    await store.save(run, turn[:1], None, intents=["call-1", "call-2"])
    await store.record_tool_results(run.run_id, [turn[1]])
    records = await store.tool_records(run.run_id, ["call-1", "call-2"])
    assert records == {"call-1": turn[1], "call-2": None}


@check(TOOL_RECORDS)
async def a_batch_of_results_is_recorded_at_once(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    await store.save(run, [], None, intents=["call-1", "call-2"])
    results = [build.tool_turn(call_id)[1] for call_id in ("call-1", "call-2", "call-3")]
    await store.record_tool_results(run.run_id, results)  # call-3 was never recorded
    await store.record_tool_results(run.run_id, [])
    records = await store.tool_records(run.run_id, ["call-1", "call-2", "call-3"])
    assert records == {"call-1": results[0], "call-2": results[1]}


@check(TOOL_RECORDS)
async def tool_records_are_kept_per_run(store: Storage) -> None:
    session, first = await build.started(store, build.messages(1))
    second = build.run(session, message_count=1)
    await store.create_runs([second], {second.run_id: build.messages(1)})
    await store.save(first, [], None, intents=["call-1"])
    await store.record_tool_results(first.run_id, [build.tool_turn("call-1")[1]])
    assert await store.tool_records(second.run_id, ["call-1"]) == {}


# a tool result as a model sees it: kept whole
_RESULT = Message(role="tool", content="x" * 100_000, tool_call_id="c" * 512, tool_name="t")


@check(TOOL_RECORDS)
async def long_call_ids_and_results_are_kept_whole(store: Storage) -> None:
    _, run = await build.started(store, build.messages(1))
    call_id = _RESULT.tool_call_id or ""
    await store.save(run, [], None, intents=[call_id])
    await store.record_tool_results(run.run_id, [_RESULT])
    assert await store.tool_records(run.run_id, [call_id]) == {call_id: _RESULT}
