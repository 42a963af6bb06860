"""The SQL storage keeps every field of a run, and finds the expired runs of its agents."""

from __future__ import annotations

from collections.abc import AsyncIterator

import msgspec
import pytest

from runpoint.plugins.sql.store import SqlStorage
from runpoint.types import Edit, Run, RunStatus, Segment, Session, Usage

# what the storage itself decides: how often a run was written, and whether it was
# cancelled, rolled back or recovered (each tested where it happens)
STORAGE_MANAGED = {"revision", "cancel_requested", "hidden", "recoveries"}


@pytest.fixture
async def storage(database: str) -> AsyncIterator[SqlStorage]:
    opened = SqlStorage(database)
    await opened.open()
    yield opened
    await opened.close()


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

    await storage.create_sessions([Session("s", "a")], [born])
    assert await storage.get_run("r") == born

    # a save writes every field that may change as the run goes, the storage's included
    written_once = {"created_at", "segments", "previous_run_id", "team_id", "user_id"}
    written_once |= {"input", "policy", "regenerated_from", "edits", "instructions"}
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
