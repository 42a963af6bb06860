"""A team run killed with SIGKILL inside a member's run: the lease watch resumes the
leader from its last checkpoint and the member from its own; no finished member run and
no finished member tool call runs again, and a side-effecting call in doubt pauses the
member and its team run until a person decides it."""

from __future__ import annotations

from pathlib import Path

import pytest

from runpoint.core.types import IN_FLIGHT, Run, RunStatus
from runpoint.facade import ContinueRun, Runpoint
from runpoint.seams.crew import MEMBER
from tests.crews import crashing_crew
from tests.kernel.test_recovery import until


async def settled(rp: Runpoint, run_id: str) -> Run:
    return await until(rp, run_id, *(s for s in RunStatus if s not in IN_FLIGHT))


def reopened(database: str) -> Runpoint:
    return Runpoint(crashing_crew.agents, database=database, lease_seconds=0.5)


async def test_a_team_killed_inside_a_member_resumes_each_run_from_its_own_checkpoint(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "visits.txt"
    team_run = await crashing_crew.kill(database, counter, "member-checkpoint")
    assert counter.read_text().split() == ["Paris"]

    monkeypatch.setenv("COUNTER", str(counter))
    async with reopened(database) as rp:
        members = {m.agent_id: m for m in await rp.storage.member_runs(team_run)}
        reader, member = members["reader"], members["counter"]
        assert reader.status is RunStatus.COMPLETED
        assert member.status is RunStatus.RUNNING
        assert member.last_checkpoint_at_message_index == 3
        run = await settled(rp, team_run)
        assert run.status is RunStatus.COMPLETED, run.error
        after = {m.agent_id: m for m in await rp.storage.member_runs(team_run)}
        _, timeline = await rp.timeline(member.run_id)
        logged = await rp.storage.read_events(run, 0, 10_000)
        own = {m.run_id: await rp.storage.read_events(m, 0, 10_000) for m in after.values()}
    # the team run's stream goes on with the member's resumption, relayed by the leader
    # that resumed it, after the events stored before the kill whose relay was lost with it
    assert [e.seq for e in logged] == list(range(1, len(logged) + 1))
    for member_run, stored in own.items():
        relayed = [e for e in logged if e.data.get(MEMBER, {}).get("run_id") == member_run]
        assert [(e.event, e.data[MEMBER]["seq"]) for e in relayed] == [
            (e.event, e.seq) for e in stored
        ], member_run  # every stored event once, in order
        assert [e.data | {MEMBER: None} for e in relayed] == [
            e.data | {MEMBER: None} for e in stored
        ]
    relayed_names = [e.event for e in own[member.run_id]]
    assert "RunContinued" in relayed_names and relayed_names[-1] == "RunCompleted"
    assert counter.read_text().split() == ["Paris", "Tokyo", "Lagos"]  # each ran once
    assert after["reader"].revision == reader.revision  # finished: never run again
    assert after["counter"].recoveries == 1 and after["counter"].status is RunStatus.COMPLETED
    # resumed from its own checkpoint: the ones before the kill stand, the rest follow
    assert [c.message_index for c in timeline] == [3, 5, 7, 8]
    assert run.content is not None and "Lagos: Lagos: noted" in run.content


async def test_a_member_call_in_doubt_pauses_the_team_until_a_person_decides(
    database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "visits.txt"
    team_run = await crashing_crew.kill(database, counter, "mid-call")
    assert counter.read_text().split() == ["Paris", "Tokyo"]

    monkeypatch.setenv("COUNTER", str(counter))
    async with reopened(database) as rp:
        paused = await settled(rp, team_run)
        assert paused.status is RunStatus.PAUSED
        members = {m.agent_id: m for m in await rp.storage.member_runs(team_run)}
        member = members["counter"]
        assert member.status is RunStatus.PAUSED and len(member.in_doubt) == 1
        # it ran (the count says so): its result, supplied, not run again
        handle = await rp.continue_run(
            ContinueRun(run_id=team_run, tools={member.in_doubt[0]: "Tokyo: noted"})
        )
        run = await handle.result()
    assert run.status is RunStatus.COMPLETED, run.error
    assert counter.read_text().split() == ["Paris", "Tokyo", "Lagos"]
