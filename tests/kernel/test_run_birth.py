"""A run is born with its input: the storage calls that insert runs write their incoming
messages in the same transaction, at their places in the session's event log."""

from __future__ import annotations

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Connection

from runpoint.core.errors import Locked
from runpoint.core.types import Message, Run, RunStatus, Segment, Session
from runpoint.plugins.sql.store import SqlStorage


def new_run(run_id: str, segments: list[Segment], message_count: int) -> Run:
    return Run(
        run_id=run_id,
        session_id="s",
        agent_id="a",
        status=RunStatus.COMPLETED,  # so the next run may start in the session
        segments=segments,
        message_count=message_count,
    )


async def places(storage: SqlStorage) -> list[tuple[str, int, int]]:
    """Every message row as (run_id, idx, event_seq), in the event log's order."""
    async with storage.engine.connect() as conn:
        rows = await conn.execute(text("SELECT run_id, idx, event_seq FROM messages ORDER BY 3"))
        return [(r, i, s) for r, i, s in rows]


async def test_runs_are_inserted_with_their_input_at_its_places_in_the_event_log(
    storage: SqlStorage,
) -> None:
    hello, again, other = (Message(role="user", content=c) for c in ("hello", "again", "other"))
    first = new_run("first", [Segment("first", 0)], 1)
    await storage.create_sessions(
        [Session(session_id="s", agent_id="a")], [first], {"first": [hello]}
    )
    # each input takes a place per message, then one for its run's first boundary, as
    # `save` would give them: the cursor has moved on by 2 after each
    assert await places(storage) == [("first", 0, 1)]
    assert (await storage.get_session("s")).event_seq == 2  # type: ignore[union-attr]

    second = await storage.start_in_session(new_run("second", [Segment("second", 0)], 1), [again])
    assert second.previous_run_id == "first"
    fork = new_run("fork", [Segment("first", 0, 1), Segment("fork", 1)], 2)
    await storage.create_runs([fork], {"fork": [other]})

    assert await places(storage) == [("first", 0, 1), ("second", 0, 3), ("fork", 1, 5)]
    assert (await storage.get_session("s")).event_seq == 6  # type: ignore[union-attr]
    assert await storage.read_messages(second.segments, 1) == [again]
    assert await storage.read_messages(fork.segments, 2) == [hello, other]
    assert (await storage.get_run("fork")).message_count == 2  # type: ignore[union-attr]
    # each run was written as a save of its input writes it: its writer goes on from there
    await storage.save(fork, [], None)

    # a run that is refused leaves nothing behind: neither its row nor its input
    await storage.lock_session("s", "maintenance")
    refused = new_run("refused", [Segment("first", 0, 1), Segment("refused", 1)], 2)
    with pytest.raises(Locked):
        await storage.create_runs([refused], {"refused": [other]})
    assert await storage.get_run("refused") is None
    assert len(await places(storage)) == 3


async def test_a_session_born_with_several_runs_gives_each_input_its_places(
    storage: SqlStorage,
) -> None:
    hello, again = Message(role="user", content="hello"), Message(role="user", content="again")
    first, second = (new_run(i, [Segment(i, 0)], 1) for i in ("first", "second"))
    quiet = new_run("quiet", [Segment("quiet", 0)], 0)  # a run with no input: no places
    session = Session(session_id="s", agent_id="a", event_seq=4)  # its log goes on from 4
    incoming = {"first": [hello], "second": [again]}
    await storage.create_sessions([session], [first, quiet, second], incoming)

    assert await places(storage) == [("first", 0, 5), ("second", 0, 7)]
    assert (await storage.get_session("s")).event_seq == 8  # type: ignore[union-attr]
    assert [r.run_id for r in await storage.list_runs("s")] == ["first", "quiet", "second"]
    # written as their input's saves would leave them: their writers go on from there
    assert (first.revision, quiet.revision, second.revision) == (1, 0, 1)
    for run in (first, quiet, second):
        await storage.save(run, [], None)


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
async def test_on_postgresql_a_session_is_born_in_one_statement(storage: SqlStorage) -> None:
    """Its row, its runs' and their input: one round trip, outside any transaction (none
    whose backend waits on runpoint between statements)."""
    sent: list[str | None] = []

    def count(conn: Connection, *_: object) -> None:
        sent.append(conn.get_execution_options().get("isolation_level"))

    event.listen(storage.engine.sync_engine, "before_cursor_execute", count)
    run = new_run("first", [Segment("first", 0)], 1)
    session = Session(session_id="s", agent_id="a")
    await storage.create_sessions([session], [run], {"first": [Message("user", "hello")]})
    assert sent == ["AUTOCOMMIT"]
    assert await places(storage) == [("first", 0, 1)]
