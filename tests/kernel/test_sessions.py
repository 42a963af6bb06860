"""Sessions: listing, copy-on-write forks, deletion."""

from __future__ import annotations

import msgspec
import pytest
from sqlalchemy import text

from runpoint.core.errors import NotFound
from runpoint.facade import ContinueRun, CreateRun, ForkSession, Runpoint
from runpoint.plugins.demo import agents
from tests.conftest import OpenRunpoint


@pytest.fixture
async def rp(open_runpoint: OpenRunpoint) -> Runpoint:
    return await open_runpoint(agents)


async def rows(rp: Runpoint, table: str) -> int:
    async with rp.storage.engine.connect() as conn:  # type: ignore[attr-defined]
        count: int = await conn.scalar(text(f"SELECT count(*) FROM {table}"))
    return count


async def test_fork_session_copies_no_message(rp: Runpoint) -> None:
    first = await (
        await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris and Tokyo"))
    ).result()
    session = first.session_id
    second = await (
        await rp.create_run(CreateRun(agent_id="travel-agent", message="Lagos", session_id=session))
    ).result()
    messages_before = await rows(rp, "messages")

    fork = await rp.fork_session(ForkSession(session_id=session))
    assert fork.forked_from_session_id == session and fork.session_id != session
    assert await rows(rp, "messages") == messages_before
    copies = await rp.list_runs(fork.session_id)
    assert [r.forked_from_run_id for r in copies] == [first.run_id, second.run_id]
    assert {r.forked_from_session_id for r in copies} == {session}
    # lineage inside the fork points at the fork's own runs
    assert copies[1].previous_run_id == copies[0].run_id
    for copy, source in zip(copies, (first, second), strict=True):
        copied = await rp.get_run(copy.run_id)
        assert copied.messages == (await rp.get_run(source.run_id)).messages
        _, copied_timeline = await rp.timeline(copy.run_id)
        _, source_timeline = await rp.timeline(source.run_id)
        assert copied_timeline == source_timeline

    # the fork goes on by itself; the source session does not see it
    more = await (
        await rp.create_run(
            CreateRun(agent_id="travel-agent", message="Kyoto", session_id=fork.session_id)
        )
    ).result()
    assert more.previous_run_id == copies[1].run_id
    assert len(await rp.list_runs(session)) == 2


async def test_sessions_are_listed_newest_first(rp: Runpoint) -> None:
    ids = [
        (
            await (await rp.create_run(CreateRun(agent_id="travel-agent", message="hi"))).result()
        ).session_id
        for _ in "abc"
    ]
    listed = [s.session_id for s in await rp.list_sessions()]
    assert listed == ids[::-1]
    assert [s.session_id for s in await rp.list_sessions(limit=1, offset=1)] == [ids[1]]


async def test_delete_session_removes_everything_it_owns(rp: Runpoint) -> None:
    run = await (await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))).result()
    fork = await rp.fork_session(ForkSession(session_id=run.session_id))
    [copied] = await rp.list_runs(fork.session_id)
    before = msgspec.json.encode(
        [await rp.get_run(copied.run_id), (await rp.timeline(copied.run_id))[1]]
    )
    # the fork keeps what it reads of its source, which goes with it
    await rp.delete_session(run.session_id)
    after = msgspec.json.encode(
        [await rp.get_run(copied.run_id), (await rp.timeline(copied.run_id))[1]]
    )
    assert after == before
    await rp.delete_session(fork.session_id)
    assert [await rows(rp, t) for t in ("sessions", "runs", "messages", "checkpoints")] == [0] * 4
    with pytest.raises(NotFound):
        await rp.get_session(run.session_id)
    with pytest.raises(NotFound):
        await rp.delete_session(run.session_id)


async def test_forks_of_runs_store_only_their_own_messages(rp: Runpoint) -> None:
    run = await (
        await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris, Tokyo and Lagos"))
    ).result()
    stored = await rows(rp, "messages")
    fork = await (
        await rp.continue_run(ContinueRun(run_id=run.run_id, continue_from=7, input="Thanks"))
    ).result()
    # the fork's rows: its input and its answer; the 7 before are the source's
    assert await rows(rp, "messages") == stored + 2
    assert len((await rp.get_run(fork.run_id)).messages) == 9
