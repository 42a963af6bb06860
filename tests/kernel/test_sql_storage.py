"""The SQL storage keeps every field of a run, finds the expired runs of its agents, and
commits the writes of runs that come together together: event appends, boundaries and
births, each kind in one transaction (one statement on PostgreSQL; on SQLite each write in
a savepoint of its own), each run's rows only while its writer's revision is the run's,
and a write that fails failing alone. PostgreSQL plans each statement once per
connection."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Coroutine
from typing import Any

import aiosqlite
import msgspec
import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError

from runpoint.conformance import build
from runpoint.conformance.events import events
from runpoint.core.errors import Conflict
from runpoint.core.types import Edit, Run, RunStatus, Segment, Session, Usage
from runpoint.plugins.sql import sqlite_groups
from runpoint.plugins.sql.database import Save
from runpoint.plugins.sql.sqlite import Sqlite
from runpoint.plugins.sql.sqlite_saves import Statements
from runpoint.plugins.sql.store import SqlStorage

# what the storage itself decides: how often a run was written, and whether it was
# cancelled, rolled back or recovered (each tested where it happens)
STORAGE_MANAGED = {"revision", "cancel_requested", "hidden", "recoveries"}


def every_field_set(n: int) -> Run:
    """A run of session "s" whose every field but the storage's differs from its default
    (and, but for the ids, from `every_field_set` of another `n`)."""
    return Run(
        run_id="r",
        session_id="s",
        agent_id="a",
        status=RunStatus.PAUSED if n else RunStatus.RUNNING,
        team_id=f"team {n}",
        user_id=f"user {n}",
        input=f"input {n}",
        content=f"content {n}",
        error=f"error {n}",
        model=f"model {n}",
        policy=f"policy {n}",
        created_at=1.0 + n,
        updated_at=2.0 + n,
        segments=[Segment("source", 0, 1 + n), Segment("r", 1 + n)],
        message_count=3 + n,
        previous_run_id=f"previous {n}",
        forked_from_run_id=f"source {n}",
        forked_from_message_index=1 + n,
        forked_from_session_id=f"session {n}",
        regenerated_from=f"regenerated {n}",
        parent_run_id=f"team run {n}",
        parent_tool_call_id=f"delegation {n}",
        edits=[Edit("user_message", n, f"replaced {n}", f"edit {n}", f"team {n}")],
        instructions=f"instructions {n}",
        last_checkpoint_at_message_index=2 + n,
        usage=Usage(10 + n, 20 + n),
        in_doubt=[f"call {n}"],
        decisions={f"call {n}": bool(n)},
        lease_owner=f"owner {n}",
        lease_expires_at=100.0 + n,
    )


async def test_every_field_of_a_run_is_kept_when_inserted_and_when_saved(
    storage: SqlStorage,
) -> None:
    born, later = every_field_set(0), every_field_set(1)
    plain = Run(run_id="r", session_id="s", agent_id="a")
    unset = {
        f.name
        for f in msgspec.structs.fields(Run)
        if getattr(born, f.name) == getattr(plain, f.name)
        or getattr(later, f.name) == getattr(born, f.name)
    }
    # a field added to Run fails here until it is set above, and then is checked below
    assert unset == STORAGE_MANAGED | {"run_id", "session_id", "agent_id"}

    # the run it reads from (a run is born only if the rows it reads are there)
    source = Run(run_id="source", session_id="session 0", agent_id="a", message_count=1)
    await storage.create_sessions(
        [Session("session 0", "a")], [source], {"source": build.messages(1)}
    )
    await storage.create_sessions([Session("s", "a")], [born])
    assert await storage.get_run("r") == born

    # a save writes every field that may change as the run goes, the storage's included
    written_once = {"created_at", "segments", "previous_run_id", "team_id", "user_id"}
    written_once |= {"input", "policy", "regenerated_from", "edits", "instructions"}
    written_once |= {"parent_run_id", "parent_tool_call_id"}
    written_once |= {f.name for f in msgspec.structs.fields(Run) if f.name.startswith("forked")}
    saved = msgspec.structs.replace(
        later, revision=born.revision, recoveries=2, **{n: getattr(born, n) for n in written_once}
    )
    await storage.save(saved, [], None)
    assert saved.revision == 1
    assert await storage.get_run("r") == saved


async def test_expired_runs_of_other_agents_do_not_hide_ours(storage: SqlStorage) -> None:
    """A process asks for the expired runs of the agents it serves: 25 of an agent it does
    not serve, whose leases ran out first, do not fill the batch before its one."""
    sessions = [Session(f"s{i}", "other") for i in range(25)] + [Session("ours", "ours")]
    runs = [
        Run(
            run_id=f"r{i}",
            session_id=s.session_id,
            agent_id=s.agent_id,
            status=RunStatus.RUNNING,
            segments=[Segment(f"r{i}", 0)],
            lease_owner="gone",
            lease_expires_at=float(i),
        )
        for i, s in enumerate(sessions)
    ]
    await storage.create_sessions(sessions, runs)
    assert [r.run_id for r in await storage.expired_runs(100.0, {"ours"})] == ["r25"]
    assert len(await storage.expired_runs(100.0, {"other", "ours"})) == 20  # a batch


def count_writes(storage: SqlStorage) -> list[str]:
    """The write transactions begun on `storage`'s engine: SQLite's BEGIN, PostgreSQL's
    statements of one or more writes (each a transaction of its own)."""
    begun: list[str] = []

    def seen(_conn: Any, _cursor: Any, sql: str, *_: Any) -> None:
        if sql.startswith(("BEGIN", "WITH")):
            begun.append(sql)

    event.listen(storage.engine.sync_engine, "before_cursor_execute", seen)
    return begun


async def test_appends_that_come_together_are_one_write(storage: SqlStorage) -> None:
    started = [(await build.started(storage))[1] for _ in range(5)]
    stale = msgspec.structs.replace(started[2])
    await storage.save(started[2], [], None)  # another writer moved this run on
    writes = count_writes(storage)

    appends = [storage.append_events(r, events(r, 1, 2)) for r in started]
    appends.append(storage.append_events(stale, events(stale, 3, 1)))
    assert await asyncio.gather(*appends) == [True] * 5 + [False]

    assert len(writes) == 1
    for run in started:
        assert await storage.read_events(run, 0, 10) == events(run, 1, 2)
    # and alone, an append is a write of its own, as soon as it comes
    assert await storage.append_events(started[0], events(started[0], 3, 1))
    assert len(writes) == 2


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
async def test_postgresql_plans_a_statement_once_per_connection(database: str) -> None:
    """An append's rows are array parameters: planned for their length, its plan would be
    made anew at every call; so it is when the caller gives server settings of its own."""
    mine = {"server_settings": {"application_name": "planned"}}
    storage = SqlStorage(database, pool_size=1, max_overflow=0, connect_args=mine)
    await storage.open()
    try:
        started = [(await build.started(storage))[1] for _ in range(10)]
        for run in started:
            assert await storage.append_events(run, events(run, 1, 2))
        async with storage.engine.connect() as conn:
            plans = await conn.execute(
                text(
                    "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                    "WHERE statement LIKE 'WITH appends%'"
                )
            )
            assert plans.all() == [(10, 0)]
            assert await conn.scalar(text("SHOW application_name")) == "planned"
        read = await storage.db.fetch("SELECT current_setting('application_name')", ())
        assert [tuple(row) for row in read] == [("planned",)]  # reads connect the same way
    finally:
        await storage.close()


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
async def test_postgresql_writes_find_their_rows_by_key_however_small_the_tables(
    storage: SqlStorage,
) -> None:
    """A connection keeps the plan it made of each statement, made while the tables may be
    nearly empty: a plan that scanned a table then would scan it at every call as it grows,
    until the server analyses it. The plans of births, appends and boundaries use indexes."""
    writes = count_writes(storage)
    run = (await build.started(storage))[1]
    assert await storage.append_events(run, events(run, 1, 2))
    await build.append(storage, run, build.messages(2), build.checkpoint(run, 2))
    await storage.save(run, [], None, intents=["call"])

    plans = []
    async with storage.engine.connect() as conn:
        connection = (await conn.get_raw_connection()).driver_connection
        assert connection is not None
        for n, sql in enumerate(dict.fromkeys(writes)):
            await connection.execute(f"PREPARE written_{n} AS {sql}")
            nulls = ", ".join(["NULL"] * len(set(re.findall(r"\$\d+", sql))))
            plan = await connection.fetch(f"EXPLAIN EXECUTE written_{n}({nulls})")
            plans.append("\n".join(row[0] for row in plan))
    assert len(plans) == 4  # a birth, an append and two shapes of boundary
    assert [plan for plan in plans if "Seq Scan" in plan] == []
    assert ["Index Scan" in plan for plan in plans] == [False, True, True, True]


async def test_boundaries_that_come_together_share_a_write_and_fail_alone(
    storage: SqlStorage,
) -> None:
    started = [(await build.started(storage))[1] for _ in range(4)]
    stale = msgspec.structs.replace(started[1])
    await storage.save(started[1], [], None)  # another writer moved this run on
    writes = count_writes(storage)

    messages = [build.messages(2, label=run.run_id) for run in started]
    for run in started:
        run.count_appended(run.message_count + 2, None)
    saves = [storage.save(r, m, None) for r, m in zip(started, messages, strict=True)]
    stale.count_appended(stale.message_count + 1, None)  # as its writer counts it
    saves.insert(2, storage.save(stale, build.messages(1, "stale"), None))
    answers = await asyncio.gather(*saves, return_exceptions=True)

    assert [type(a) for a in answers] == [type(None)] * 2 + [Conflict] + [type(None)] * 2
    assert len(writes) == 1
    for run, written in zip(started, messages, strict=True):
        assert await storage.read_messages(run.segments, run.message_count) == written
        assert (await storage.get_run(run.run_id)).revision == run.revision  # type: ignore[union-attr]
    # the refused boundary left nothing: the next write of its run goes on from there
    await storage.save(started[1], [], None)


async def test_boundaries_of_one_session_that_come_together_take_its_places_in_turn(
    storage: SqlStorage,
) -> None:
    session = build.session()
    runs = [build.run(session) for _ in range(3)]
    await storage.create_sessions([session], runs)
    stale = msgspec.structs.replace(runs[1])
    await storage.save(runs[1], [], None)  # its places: 1 (no messages)
    writes = count_writes(storage)

    saves = [
        build.append(storage, run, build.messages(2), build.checkpoint(run, 2)) for run in runs
    ]
    saves.insert(1, build.append(storage, stale, build.messages(1), build.checkpoint(stale, 1)))
    answers = await asyncio.gather(*saves, return_exceptions=True)

    assert [type(a) for a in answers] == [type(None), Conflict, type(None), type(None)]
    assert len(writes) == 1
    # each took the next 3 places, in the order they came: 2 messages, then its boundary
    marks = [(await storage.list_checkpoints(run.segments))[0].event_seq for run in runs]
    assert marks == [4, 7, 10]
    assert (await storage.get_session(session.session_id)).event_seq == 10  # type: ignore[union-attr]


async def test_a_boundary_that_fails_among_others_fails_alone(storage: SqlStorage) -> None:
    started = [(await build.started(storage))[1] for _ in range(3)]
    await storage.save(started[1], [], None, intents=["call"])
    writes = count_writes(storage)

    saves = [storage.save(run, [], None, intents=["call"]) for run in started]
    answers = await asyncio.gather(*saves, return_exceptions=True)

    # the call was recorded already: that boundary's rows cannot all go in
    assert [type(a) for a in answers] == [type(None), IntegrityError, type(None)]
    assert writes[0].startswith(("BEGIN", "WITH boundaries"))  # they went together first
    for run in started:  # the failing one's writer did not count a write
        assert (await storage.get_run(run.run_id)).revision == run.revision  # type: ignore[union-attr]
    assert set(await storage.tool_records(started[0].run_id, ["call"])) == {"call"}


async def test_a_boundary_bringing_a_stored_checkpoint_and_event_goes_with_its_group(
    storage: SqlStorage,
) -> None:
    """The first checkpoint at an index stands, as the first event at a seq, when the
    boundary that brings another goes with others: they all go in the one write."""
    started = [(await build.started(storage, build.messages(1)))[1] for _ in range(3)]
    taken = started[1]
    first, stored = build.checkpoint(taken, 1), events(taken, 1, 1)
    await build.append(storage, taken, [], first)
    assert await storage.append_events(taken, stored)
    writes = count_writes(storage)

    marks = [build.checkpoint(run, 1, "end") for run in started]
    ending = [msgspec.structs.replace(e, event="RunError") for e in stored]
    saves = [
        storage.save(run, [], mark, events=ending) for run, mark in zip(started, marks, strict=True)
    ]
    await asyncio.gather(*saves)

    assert len(writes) == 1
    kept = [[c.checkpoint_id for c in await storage.list_checkpoints(r.segments)] for r in started]
    assert kept == [[marks[0].checkpoint_id], [first.checkpoint_id], [marks[2].checkpoint_id]]
    assert await storage.read_events(taken, 0, 10) == stored
    for run in started:
        assert (await storage.get_run(run.run_id)).revision == run.revision  # type: ignore[union-attr]
        if run is not taken:
            assert [e.event for e in await storage.read_events(run, 0, 10)] == ["RunError"]


async def test_births_that_come_together_share_a_write_and_fail_alone(
    storage: SqlStorage,
) -> None:
    writes = count_writes(storage)
    sessions = [build.session() for _ in range(4)]
    runs = [build.run(s, message_count=1) for s in sessions]

    def births(count: int) -> list[Coroutine[Any, Any, None]]:
        return [
            storage.create_sessions([s], [r], {r.run_id: build.messages(1)})
            for s, r in zip(sessions[:count], runs[:count], strict=True)
        ]

    await asyncio.gather(*births(2))
    assert len(writes) == 1
    # born again with two new ones: those two are born, the others refused alone
    answers = await asyncio.gather(*births(4), return_exceptions=True)
    assert [type(a) for a in answers] == [Conflict, Conflict, type(None), type(None)]
    for run in runs:
        assert await storage.read_messages(run.segments, 1) == build.messages(1)


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_sqlite_a_lone_boundary_or_append_is_one_trip_to_its_thread(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Statements and their transaction's BEGIN and COMMIT go to SQLite's thread together
    (`plugins/sql/sqlite_groups.py`): a trip a write, a birth's included, and none to give
    its connection back (a ROLLBACK of nothing: `one_hop`)."""
    trips: list[str] = []
    execute = aiosqlite.Connection._execute

    async def counted(self: aiosqlite.Connection, fn: Any, *args: Any) -> Any:
        trips.append("trip")
        return await execute(self, fn, *args)  # type: ignore[no-untyped-call]

    monkeypatch.setattr(aiosqlite.Connection, "_execute", counted)
    writes = count_writes(storage)
    _, run = await build.started(storage, build.messages(1))
    assert (len(trips), writes) == (1, ["BEGIN IMMEDIATE"])
    mark = build.checkpoint(run, 3)
    await build.append(storage, run, build.messages(2, "more"), mark)
    assert (len(trips), writes) == (2, ["BEGIN IMMEDIATE"] * 2)
    assert await storage.append_events(run, events(run, 1, 3))
    assert (len(trips), writes) == (3, ["BEGIN IMMEDIATE"] * 3)

    assert await build.transcript(storage, run) == build.messages(1) + build.messages(2, "more")
    assert [c.checkpoint_id for c in await storage.list_checkpoints(run.segments)] == [
        mark.checkpoint_id
    ]
    assert await storage.read_events(run, 0, 10) == events(run, 1, 3)


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_sqlite_a_connection_given_back_in_a_transaction_is_rolled_back(
    storage: SqlStorage,
) -> None:
    """The rollback a connection goes back to the pool with is skipped only when SQLite
    has no transaction open: what one left open is taken back, and the next write begins
    its own."""
    assert isinstance(storage.db, Sqlite)
    async with storage.db.engine.connect() as conn:
        await conn.exec_driver_sql("BEGIN IMMEDIATE")
        await conn.exec_driver_sql("INSERT INTO secrets (name, value) VALUES ('left', x'00')")
    _, run = await build.started(storage, build.messages(1))  # would fail inside it
    assert await build.transcript(storage, run) == build.messages(1)
    async with storage.db.engine.connect() as conn:
        found = await conn.exec_driver_sql("SELECT count(*) FROM secrets WHERE name = 'left'")
        assert found.scalar() == 0


class HeldWrite:
    """A grouped write of a row of `secrets`, held open until `go_on` is set."""

    def __init__(self, storage: SqlStorage) -> None:
        assert isinstance(storage.db, Sqlite)
        self.db = storage.db
        self.inside, self.go_on = asyncio.Event(), asyncio.Event()

    async def __call__(self) -> None:
        async with self.db.single_write() as conn:
            self.inside.set()
            await self.go_on.wait()
            await conn.exec_driver_sql("INSERT INTO secrets (name, value) VALUES ('a', x'00')")

    async def begun(self) -> asyncio.Task[None]:
        """The write, once it holds its group open."""
        write = asyncio.create_task(self())
        await self.inside.wait()
        return write

    def joining(self, why: str) -> asyncio.Task[None]:
        """A grouped write that must not get to run: `why` it would be wrong."""

        async def join() -> None:
            async with self.db.single_write():
                raise AssertionError(why)

        return asyncio.create_task(join())

    async def written(self) -> bool:
        async with self.db.write() as conn:  # the database's writer is free, and has it
            count = await conn.scalar(text("SELECT count(*) FROM secrets WHERE name = 'a'"))
        return bool(count == 1)


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_sqlite_a_write_that_gives_up_joining_leaves_its_group_committed(
    storage: SqlStorage,
) -> None:
    held = HeldWrite(storage)
    db, go_on = held.db, held.go_on
    written = await held.begun()
    joining = held.joining("it gave up before its turn")
    await asyncio.sleep(0.01)  # waiting for its turn when the first's body ends
    release = db._turn.release

    def gives_up() -> None:  # the moment the first's body ends, the second gives up
        release()
        joining.cancel()

    db._turn.release = gives_up  # type: ignore[method-assign]
    go_on.set()
    await asyncio.wait_for(written, 5)  # committed without the one that gave up
    assert joining.cancelled()
    assert await held.written()


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_sqlite_a_write_left_open_for_one_that_gave_up_is_committed(
    storage: SqlStorage,
) -> None:
    """A write in one trip is not its group's last while another waits to join; if that
    one gives up while the trip goes, the write commits the group itself."""
    held = HeldWrite(storage)
    db, in_trip, go_on = held.db, threading.Event(), threading.Event()

    def body(s: Statements) -> None:  # in SQLite's thread
        in_trip.set()
        go_on.wait(5)
        s.one("INSERT INTO secrets (name, value) VALUES ('b', x'00')")

    written = await held.begun()
    trip = asyncio.create_task(db.grouped(body))
    await asyncio.sleep(0.01)  # waiting for its turn, as the next is
    joining = held.joining("it gave up before its turn")
    await asyncio.sleep(0.01)
    held.go_on.set()  # the held write goes, then the trip, left open for the next
    await asyncio.to_thread(in_trip.wait, 5)
    joining.cancel()  # which gives up while the trip goes
    await asyncio.sleep(0.01)
    go_on.set()
    await asyncio.wait_for(asyncio.gather(written, trip), 5)
    assert joining.cancelled()
    async with db.write() as conn:
        count = await conn.scalar(text("SELECT count(*) FROM secrets WHERE name IN ('a', 'b')"))
    assert count == 2


@pytest.mark.parametrize("database", ["sqlite"], indirect=True)
async def test_sqlite_a_write_that_fails_to_begin_in_a_group_leaves_it_committed(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = HeldWrite(storage)
    db, go_on = held.db, held.go_on
    written = await held.begun()
    group = db._group
    assert group is not None
    joining = held.joining("its savepoint failed")
    await asyncio.sleep(0.01)  # waiting for its turn in the group
    opened = sqlite_groups.opened

    def fails(s: Statements) -> bool:  # the savepoint of a write that joins the group
        if s.conn.in_transaction:
            raise OSError("no savepoint")
        return opened(s)

    monkeypatch.setattr(sqlite_groups, "opened", fails)
    go_on.set()
    with pytest.raises(OSError):
        await joining
    await asyncio.wait_for(written, 5)  # committed by the last of the group, which failed
    assert await held.written()


async def test_a_save_whose_answer_was_lost_is_found_written_when_retried(
    storage: SqlStorage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection cut at its commit: the save was written, its writer got an error and
    retries it (runpoint.durable.outages). The retry finds its own write and goes on, once;
    the retry of a save another writer has since overtaken is still a conflict."""
    _, run = await build.started(storage, build.messages(1))
    real = storage.db.save

    async def written_then_lost(written: Save) -> bool | None:
        await real(written)
        raise ConnectionResetError("the answer was lost with the connection")

    new = build.messages(1, "more")
    monkeypatch.setattr(storage.db, "save", written_then_lost)
    with pytest.raises(ConnectionResetError):
        await build.append(storage, run, new)
    monkeypatch.undo()
    revision = run.revision
    await storage.save(run, new, None)
    assert run.revision == revision + 1
    assert await storage.get_run(run.run_id) == run
    assert await build.transcript(storage, run) == build.messages(1) + new

    monkeypatch.setattr(storage.db, "save", written_then_lost)
    with pytest.raises(ConnectionResetError):
        await storage.save(run, [], None)
    monkeypatch.undo()
    other = await storage.get_run(run.run_id)
    assert other is not None
    other.count_appended(other.message_count, Usage(1, 1))  # another writer's change
    await storage.save(other, [], None)
    with pytest.raises(Conflict):
        await storage.save(run, [], None)
