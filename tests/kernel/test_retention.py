"""Retention sweeps on every backend: what no surviving run reads goes, what one reads
answers byte for byte as before, a run not finished stays, checkpoints and event logs
are kept as the policy says."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence

import msgspec
import pytest
from sqlalchemy import text

from runpoint import hookimpl
from runpoint.core.errors import NotFound
from runpoint.core.types import RunStatus, Timing, now
from runpoint.facade import Branch, ContinueRun, CreateRun, FanOut, ForkSession, Runpoint
from runpoint.plugins.demo import agents
from runpoint.plugins.memory import MemoryStorage
from runpoint.plugins.sql.store import SqlStorage
from runpoint.runs.edits import ReplaceToolResult
from runpoint.seams.host import PluginHost
from runpoint.seams.retention import Removed, Retention

pytestmark = pytest.mark.parametrize("database", ["memory", "sqlite", "postgresql"], indirect=True)
AGE = 0.5  # seconds: a run finished longer ago is old


@pytest.fixture
async def rp(database: str) -> AsyncIterator[Runpoint]:
    runpoint = await Runpoint(agents, database=database, retention=Retention(runs=AGE)).open()
    yield runpoint
    await runpoint.close()


def sweeping_before(rp: Runpoint, moment: float) -> None:
    """The sweeps remove the runs that finished before `moment`, not those made after it,
    however long the machine took to make and read them (a loaded one takes seconds)."""
    rp.sweeper.server = Retention(runs=now() - moment)


async def reads(rp: Runpoint, run_ids: Sequence[str]) -> bytes:
    """What a client reads of these runs: each one whole, its timeline, its snapshot at
    each checkpoint, its diff from start to end and its events as a join sends them,
    encoded."""
    found: list[object] = []
    for run_id in run_ids:
        _, timeline = await rp.timeline(run_id)
        found += [await rp.get_run(run_id), timeline, await rp.diff(run_id, message_index=1)]
        found.append([e async for e in await rp.follow(run_id)])
        found += [await rp.snapshot(run_id, c.message_index) for c in timeline]
    return msgspec.json.encode(found)


async def test_a_source_goes_and_its_forks_read_byte_for_byte(rp: Runpoint) -> None:
    source = await (
        await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris, Tokyo and Lagos"))
    ).result()
    await asyncio.sleep(AGE + 0.1)
    moment = now()
    fork = await (
        await rp.continue_run(ContinueRun(run_id=source.run_id, continue_from=3, input="Paris"))
    ).result()
    before = await reads(rp, [fork.run_id])
    sweeping_before(rp, moment)
    removed = await rp.sweeper.sweep_all()
    assert removed.run_ids == [source.run_id] and removed.sessions == 0
    assert removed.messages > 0 and removed.checkpoints > 0, "its tail, which no fork reads"
    assert await reads(rp, [fork.run_id]) == before
    with pytest.raises(NotFound):
        await rp.get_run(source.run_id)
    # a session fork of what is left; then retention takes the whole source session
    await asyncio.sleep(AGE + 0.1)
    moment = now()
    copy = await rp.fork_session(ForkSession(session_id=fork.session_id))
    [copied] = await rp.list_runs(copy.session_id)
    before = await reads(rp, [copied.run_id])
    sweeping_before(rp, moment)
    removed = await rp.sweeper.sweep_all()
    assert removed.run_ids == [fork.run_id] and removed.sessions == 1
    assert await reads(rp, [copied.run_id]) == before
    await asyncio.sleep(AGE + 0.1)
    sweeping_before(rp, now())
    assert (await rp.sweeper.sweep_all()).run_ids == [copied.run_id]
    assert await rp.list_sessions() == []
    assert await stored(rp) == 0, "what the forks read went with the last of them"


async def test_a_source_goes_under_an_edit_fork_and_fan_out_branches(rp: Runpoint) -> None:
    source = await (
        await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris, Tokyo and Lagos"))
    ).result()
    await asyncio.sleep(AGE + 0.1)
    moment = now()
    paris = (await rp.get_run(source.run_id)).tools[0]
    edit = ReplaceToolResult(paris.tool_call_id, "99M")
    edited = await (
        await rp.continue_run(ContinueRun(run_id=source.run_id, continue_from=3, edits=[edit]))
    ).result()
    branches = [Branch(input="Only Paris"), Branch(input="Only Lagos")]
    fanned = await rp.fan_out(FanOut(run_id=source.run_id, continue_from=3, branches=branches))
    readers = [edited.run_id, *[(await h.result()).run_id for h in fanned]]
    before = await reads(rp, readers)
    sweeping_before(rp, moment)
    removed = await rp.sweeper.sweep_all()
    assert removed.run_ids == [source.run_id]
    assert await reads(rp, readers) == before


async def test_a_deleted_session_leaves_its_session_fork_whole(rp: Runpoint) -> None:
    source = await (
        await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris and Tokyo"))
    ).result()
    copy = await rp.fork_session(ForkSession(session_id=source.session_id))
    readers = [r.run_id for r in await rp.list_runs(copy.session_id)]
    before = await reads(rp, readers)
    await rp.delete_session(source.session_id)
    assert await reads(rp, readers) == before
    await rp.delete_session(copy.session_id)
    assert await stored(rp) == 0


async def test_a_paused_run_and_the_runs_it_follows_stay(rp: Runpoint) -> None:
    first = await (
        await rp.create_run(CreateRun(agent_id="booking-agent", message="Hello"))
    ).result()
    paused = await (
        await rp.create_run(
            CreateRun(agent_id="booking-agent", message="Book Kyoto", session_id=first.session_id)
        )
    ).result()
    assert paused.status is RunStatus.PAUSED
    await asyncio.sleep(AGE + 0.1)
    removed = await rp.sweeper.sweep_all()
    assert removed.runs == 0, "the paused run reads the first as its history"
    assert (await rp.get_run(paused.run_id)).run.status is RunStatus.PAUSED


async def test_an_agent_keeps_its_runs_longer_than_the_server(database: str) -> None:
    keeping = [dataclasses.replace(agents[0], retention=Retention.of(runs="never"))]
    async with Runpoint(keeping, database=database, retention=Retention(runs=0)) as rp:
        run = await (
            await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))
        ).result()
        assert (await rp.sweeper.sweep_all()).runs == 0
        assert (await rp.get_run(run.run_id)).run.status is RunStatus.COMPLETED


async def test_keep_last_checkpoints_and_drop_event_logs(database: str) -> None:
    policy = Retention(checkpoints=1, events=0)
    async with Runpoint(agents, database=database, retention=policy) as rp:
        run = await (
            await rp.create_run(
                CreateRun(agent_id="travel-agent", message="Paris, Tokyo and Lagos")
            )
        ).result()
        _, timeline = await rp.timeline(run.run_id)
        assert len(timeline) > 2
        removed = await rp.sweeper.sweep_all()
        assert removed.checkpoints == len(timeline) - 1 and removed.events > 0
        _, kept = await rp.timeline(run.run_id)
        assert [c.reason for c in kept] == ["end"]
        assert (await rp.snapshot(run.run_id, kept[0].message_index)).checkpoint == kept[0]
        # the run answers from its stored state; a join has no events left to send
        assert (await rp.get_run(run.run_id)).run.content == run.content
        assert [e async for e in await rp.follow(run.run_id)] == []


async def stored(rp: Runpoint) -> int:
    """Rows left in the tables a run writes to (memory: its dictionaries' entries)."""
    storage = rp.storage
    if isinstance(storage, MemoryStorage):
        rows = sum(len(r) for r in storage._messages.values())
        rows += sum(len(r) for r in storage._checkpoints.values())
        return rows + len(storage._runs) + len(storage._sessions)
    assert isinstance(storage, SqlStorage)
    total = 0
    async with storage.engine.connect() as conn:
        for table in ("sessions", "runs", "messages", "checkpoints", "run_reads", "run_events"):
            found: int = (await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
            total += found
    return total


async def test_one_process_sweeps_at_a_time(rp: Runpoint) -> None:
    from runpoint.core.types import KeyClaim, now
    from runpoint.durable.retention import CLAIM_KEY, CLAIM_SCOPE

    await (await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))).result()
    await asyncio.sleep(AGE + 0.1)
    other = KeyClaim(CLAIM_SCOPE, CLAIM_KEY, "another process")
    assert await rp.storage.claim_key(other, "sweep", now() + 60) is None
    assert await rp.sweeper.sweep_in_turn() is None, "the other process is sweeping"
    await rp.storage.release_key(other)
    swept = await rp.sweeper.sweep_in_turn()
    assert swept is not None and swept.runs == 1
    # a process that died mid-sweep: its claim runs out, and another takes it over
    assert await rp.storage.claim_key(other, "sweep", now() - 1) is None
    assert await rp.sweeper.sweep_in_turn() is not None


class Swept:
    def __init__(self) -> None:
        self.removed: list[Removed] = []

    @hookimpl
    def runpoint_retention_swept(self, removed: Removed, timing: Timing) -> None:
        assert timing.seconds >= 0
        self.removed.append(removed)


async def test_a_sweep_is_reported_to_plugins(database: str) -> None:
    swept = Swept()
    host = PluginHost([swept])
    async with Runpoint(agents, database=database, host=host, retention=Retention(runs=0)) as rp:
        await (await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))).result()
        await rp.sweeper.sweep_in_turn()
    assert [r.runs for r in swept.removed] == [1]


async def test_answered_keys_past_their_time_go_and_recent_ones_stay(database: str) -> None:
    async with Runpoint(agents, database=database, retain_keys=AGE) as rp:
        made = CreateRun(agent_id="travel-agent", message="Paris")

        async def create(key: str) -> str:
            return (await (await rp.create_run(made, idempotency_key=key)).result()).run_id

        old = await create("old")
        await asyncio.sleep(AGE + 0.1)
        recent = await create("recent")
        assert (await rp.sweeper.sweep()).keys == 1
        assert await create("recent") == recent, "a retry within the time replays"
        assert await create("old") != old, "a retry after it starts afresh"


async def test_a_sweep_is_a_bounded_batch_in_transactions_the_storage_sizes(
    database: str,
) -> None:
    async with Runpoint(
        agents, database=database, retention=Retention(runs=0), sweep_batch=8
    ) as rp:
        made = [
            await (
                await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))
            ).result()
            for _ in range(11)
        ]
        storage, removals = rp.storage, []
        remove_runs = storage.remove_runs

        async def counted(run_ids: Sequence[str], *, dry_run: bool = False) -> Removed:
            removals.append(len(run_ids))
            return await remove_runs(run_ids, dry_run=dry_run)

        storage.remove_runs = counted  # type: ignore[method-assign]
        assert (await rp.sweeper.sweep()).runs == 8, "a batch at most"
        size = storage.removals_per_transaction
        assert removals == [min(size, 8 - n) for n in range(0, 8, size)]
        assert (await rp.sweeper.sweep()).runs == 3, "the next sweep goes on"
        for run in made:
            with pytest.raises(NotFound):
                await rp.get_run(run.run_id)
