"""runpoint from Python, without HTTP (`runpoint.open`), on SQLite and PostgreSQL: start,
stream, cancel and continue runs, timelines and snapshots, fork, diff and fan out, with
the facade's types and the errors the HTTP layer maps; and the same calls blocking, for
code that is not async. The database argument takes the forms `--db` takes."""

from __future__ import annotations

from pathlib import Path

import pytest

import runpoint
from runpoint.adapters.litestar import create_app
from runpoint.core.errors import ConfigurationError, InvalidBoundary, NotFound
from runpoint.core.types import Run, RunStatus
from runpoint.facade import Branch, ContinueRun, CreateRun, FanOut, ForkSession, Runpoint
from runpoint.plugins.demo import agents

PARIS = CreateRun(agent_id="travel-agent", message="Compare Paris and Tokyo")


async def test_each_operation(database: str) -> None:
    async with runpoint.open(database, agents=agents) as rp:
        assert isinstance(rp, Runpoint)
        run = await (await rp.create_run(PARIS)).result()
        assert isinstance(run, Run) and run.status == RunStatus.COMPLETED
        ids = {"session_id": run.session_id, "agent_id": run.agent_id}

        _, checkpoints = await rp.timeline(run.run_id, **ids)
        assert [c.message_index for c in checkpoints] == [3, 5, 6]
        snapshot = await rp.snapshot(run.run_id, 3, **ids)
        assert (
            snapshot.detail.run.status == RunStatus.RUNNING and len(snapshot.detail.messages) == 3
        )

        again = ContinueRun(run_id=run.run_id, continue_from=3, input="Only Paris")
        forked = await (await rp.continue_run(again)).result()
        assert forked.forked_from_run_id == run.run_id
        diff = await rp.diff(run.run_id, other_run_id=forked.run_id, session_id=run.session_id)
        assert diff.common_index == 3 and diff.added

        branches = [Branch(input="Only Paris"), Branch(input="Only Tokyo")]
        fanned = await rp.fan_out(
            FanOut(run_id=run.run_id, branches=branches, continue_from=3, session_id=run.session_id)
        )
        ended = [await handle.result() for handle in fanned]
        assert [r.forked_from_message_index for r in ended] == [3, 3]

        handle = await rp.create_run(
            CreateRun(agent_id="booking-agent", message="Book Kyoto"), stream=True
        )
        names = [event.event async for event in handle.events()]
        assert names[0] == "RunStarted" and names[-1] == "RunPaused"
        paused = handle.run
        joined = [
            e.event for batch in [b async for b in await rp.follow(paused.run_id)] for e in batch
        ]
        assert joined == names
        cancelled = await rp.cancel(paused.run_id)
        assert cancelled.status == RunStatus.CANCELLED

        session = await rp.fork_session(ForkSession(session_id=run.session_id))
        assert session.session_id != run.session_id
        assert len(await rp.list_runs(session.session_id)) == len(
            await rp.list_runs(run.session_id)
        )

        with pytest.raises(NotFound):
            await rp.timeline("no-such-run")
        with pytest.raises(InvalidBoundary):
            await rp.continue_run(ContinueRun(run_id=run.run_id, continue_from=99))


def test_each_operation_blocking(database: str) -> None:
    with runpoint.open(database, agents=agents) as rp:
        run = rp.create_run(PARIS)
        assert run.status == RunStatus.COMPLETED
        _, checkpoints = rp.timeline(run.run_id)
        assert [c.message_index for c in checkpoints] == [3, 5, 6]
        assert rp.snapshot(run.run_id, 3).detail.run.status == RunStatus.RUNNING
        forked = rp.continue_run(ContinueRun(run_id=run.run_id, continue_from=3, input="Paris"))
        assert rp.diff(run.run_id, other_run_id=forked.run_id).common_index == 3
        fanned = rp.fan_out(
            FanOut(run_id=run.run_id, branches=[Branch(input="x")], continue_from=3)
        )
        assert [r.status for r in fanned] == [RunStatus.COMPLETED]
        booking = CreateRun(agent_id="booking-agent", message="Book Kyoto")
        names = [event.event for event in rp.stream(booking)]
        assert names[-1] == "RunPaused"
        (paused,) = [r for r in rp.list_runs(rp.list_sessions()[0].session_id)]
        assert [e.event for e in rp.follow(paused.run_id)] == names
        assert rp.cancel(paused.run_id).status == RunStatus.CANCELLED
        assert rp.fork_session(ForkSession(session_id=run.session_id)).session_id
        with pytest.raises(NotFound):
            rp.timeline("no-such-run")


@pytest.mark.memory
def test_one_database_argument(tmp_path: Path) -> None:
    for database in (str(tmp_path / "a.db"), f"sqlite:///{tmp_path / 'b.db'}", "memory:"):
        with runpoint.open(database, agents=agents) as rp:
            assert rp.create_run(PARIS).status == RunStatus.COMPLETED
        assert create_app(agents, database=database).runpoint.storage is not None
    assert (tmp_path / "a.db").is_file() and (tmp_path / "b.db").is_file()
    for wrong, says in [
        ("mysql://u:secret@h/x", "no storage named 'mysql'"),
        (str(tmp_path / "no" / "x.db"), "no directory"),
    ]:
        with pytest.raises(ConfigurationError, match=says) as refused:
            create_app(agents, database=wrong)
        assert "secret" not in str(refused.value)
        with pytest.raises(ConfigurationError, match=says), runpoint.open(wrong, agents=agents):
            pass
