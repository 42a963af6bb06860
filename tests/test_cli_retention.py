"""`runpoint db prune` and `runpoint db backup` through the real command."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from runpoint.core.errors import NotFound
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.demo import agents
from tests.kernel.crashing_session import kill_frozen

COMMAND = Path(sys.executable).parent / "runpoint"


async def runpoint(*args: str) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNPOINT_")}
    process = await asyncio.create_subprocess_exec(
        COMMAND, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("database", ["sqlite", "postgresql"], indirect=True)
async def test_prune_says_what_it_would_remove_then_removes_it(database: str) -> None:
    async with Runpoint(agents, database=database) as rp:
        run = await (
            await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))
        ).result()
    status, out, _ = await runpoint(
        "db", "prune", "--db", database, "--retain-runs", "0s", "--dry-run"
    )
    assert status == 0
    assert out.splitlines()[0] == f"would remove run {run.run_id}"
    assert out.splitlines()[-1].startswith("would remove 1 runs, 1 sessions, ")
    async with Runpoint(agents, database=database) as rp:
        assert (await rp.get_run(run.run_id)).run.run_id == run.run_id
    status, out, _ = await runpoint("db", "prune", "--db", database, "--retain-runs", "0s")
    assert status == 0 and out.splitlines()[0] == f"removed run {run.run_id}"
    async with Runpoint(agents, database=database) as rp:
        with pytest.raises(NotFound):
            await rp.get_run(run.run_id)
    status, out, _ = await runpoint("db", "prune", "--db", database)
    assert (
        out.strip()
        == "removed 0 runs, 0 sessions, 0 messages, 0 checkpoints, 0 events (0 bytes of documents)"
    )


async def test_a_backup_taken_while_runs_are_written_opens_migrates_and_serves(
    tmp_path: Path,
) -> None:
    database = f"sqlite:///{tmp_path / 'live.db'}"
    copy = tmp_path / "copy.db"
    async with Runpoint(agents, database=database) as rp:
        first = await (
            await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris and Tokyo"))
        ).result()

        async def write() -> None:
            while True:
                await (
                    await rp.create_run(CreateRun(agent_id="travel-agent", message="Lagos"))
                ).result()

        writing = asyncio.create_task(write())
        try:
            status, out, err = await runpoint("db", "backup", str(copy), "--db", database)
        finally:
            writing.cancel()
        assert status == 0, err
        assert out.startswith(f"{database}: backed up to {copy} (")
        assert [name for name in os.listdir(tmp_path) if "partial" in name] == []
        expected = await rp.get_run(first.run_id)
    async with Runpoint(agents, database=f"sqlite:///{copy}") as restored:
        assert await restored.get_run(first.run_id) == expected
        served = await (
            await restored.create_run(CreateRun(agent_id="travel-agent", message="Kyoto"))
        ).result()
        assert served.content


@pytest.mark.parametrize("database", ["postgresql"], indirect=True)
async def test_a_backup_of_postgresql_names_pg_dump(database: str, tmp_path: Path) -> None:
    status, _, err = await runpoint("db", "backup", str(tmp_path / "x"), "--db", database)
    assert status == 2 and "use pg_dump" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


async def test_a_backup_killed_midway_leaves_no_file_that_looks_complete(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'live.db'}"
    copy = tmp_path / "copy.db"
    async with Runpoint(agents, database=database) as rp:
        await (await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"))).result()
    await kill_frozen("tests.kernel.crashing_backup", database, str(copy))
    assert not copy.exists(), "only the partial copy, named so"
    assert (tmp_path / ".copy.db.partial").exists()
    status, _, err = await runpoint("db", "backup", str(copy), "--db", database)
    assert status == 0, err
    assert [n for n in os.listdir(tmp_path) if "copy" in n] == ["copy.db"], "the partial went"
