"""`runpoint team erase`: the team's key destroyed at once, its rows then removed in
batches while the other teams serve; killed midway, run again, it finishes."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import create_async_engine

from runpoint.core.errors import NotFound
from runpoint.core.keyring import Keyring
from runpoint.core.tenancy import Principal, acting_as
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.plugins.sql.schema import sessions, team_keys
from tests.storage.test_encryption import OLD, async_url
from tests.test_cli_encryption import COMMAND, keys_file, runpoint

SESSIONS = 60


async def count(database: str, team: str) -> tuple[int, int]:
    """How many sessions, and keys, `team` has."""
    engine = create_async_engine(async_url(database))
    async with engine.connect() as conn:
        found = []
        for table in (sessions, team_keys):
            query = select(func.count()).select_from(table).where(table.c.team_id == team)
            found.append(int((await conn.execute(query)).scalar_one()))
    await engine.dispose()
    return found[0], found[1]


async def test_no_keyring_or_an_unknown_team_is_one_line(database: str, tmp_path: Path) -> None:
    status, _, err = await runpoint("team", "erase", "acme", "--db", database)
    assert status == 2 and err.count("\n") == 1 and "no keyring" in err, err
    keys = keys_file(tmp_path / "keys", ("k1", OLD))
    status, out, err = await runpoint(
        "team", "erase", "acme", "--db", database, "--encryption-keys", keys
    )
    assert (status, out) == (1, "")
    assert err == f"runpoint team erase: --db {database} holds nothing of team 'acme'\n"


async def test_an_erasure_killed_midway_finishes_when_run_again(
    database: str, tmp_path: Path
) -> None:
    keyring = Keyring({"k1": OLD})
    async with Runpoint(agents, database=database, keyring=keyring, schedule=False) as rp:
        with acting_as(Principal("acme")):
            acme = [
                await (
                    await rp.create_run(CreateRun(agent_id="travel-agent", message=f"city {n}"))
                ).result()
                for n in range(SESSIONS)
            ]
        with acting_as(Principal("globex")):
            globex = await (
                await rp.create_run(CreateRun(agent_id="travel-agent", message="Lima"))
            ).result()
    keys = keys_file(tmp_path / "keys", ("k1", OLD))
    async with Runpoint(agents, database=database, keyring=keyring, schedule=False) as serving:
        process = await asyncio.create_subprocess_exec(
            COMMAND, "team", "erase", "acme", "--db", database, "--encryption-keys", keys,
            "--batch", "1", stdout=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        # the other team serves all along; killed once some of acme's sessions went
        while (await count(database, "acme"))[0] == SESSIONS:
            assert process.returncode is None, "the erasure ended before it was killed"
            with acting_as(Principal("globex")):
                assert (await serving.get_run(globex.run_id)).messages[0].content == "Lima"
        process.send_signal(signal.SIGKILL)
        assert await process.wait() == -signal.SIGKILL
        left, key = await count(database, "acme")
        assert 0 < left < SESSIONS and key == 0  # the key went first

        status, out, _ = await runpoint(
            "team", "erase", "acme", "--db", database, "--encryption-keys", keys
        )
        assert status == 0 and f"removed its {left} sessions" in out, out
        assert await count(database, "acme") == (0, 0)
        with acting_as(Principal("acme")), pytest.raises(NotFound):
            await serving.get_run(acme[-1].run_id)
        with acting_as(Principal("globex")):
            assert (await serving.get_run(globex.run_id)).messages[0].content == "Lima"
