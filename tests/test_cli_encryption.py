"""`runpoint db encrypt` and `runpoint db rotate-key`: online, in batches, and a kill midway
loses nothing; a bad keyring file is one line and exit 2."""

from __future__ import annotations

import asyncio
import base64
import signal
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import create_async_engine

from runpoint.core.errors import Unreadable
from runpoint.core.keyring import Keyring
from runpoint.core.types import Segment
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.plugins.sql.schema import messages
from tests.kernel.test_approvals import paused
from tests.storage.test_encryption import NEW, OLD, SECRETS, a_schedule, async_url

COMMAND = Path(sys.executable).parent / "runpoint"
RUNS = 40


def keys_file(path: Path, *keys: tuple[str, bytes]) -> str:
    path.write_text("".join(f"{k} {base64.b64encode(v).decode()}\n" for k, v in keys))
    return str(path)


async def runpoint(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        COMMAND, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot read it"),
        ("k1 " + base64.b64encode(b"short").decode(), "key 'k1' is 5 bytes"),
    ],
)
@pytest.mark.parametrize("command", [("serve",), ("db", "rotate-key"), ("db", "encrypt")])
async def test_a_bad_keyring_is_one_line_and_exit_2(
    tmp_path: Path, content: str | None, said: str, command: tuple[str, ...]
) -> None:
    path = tmp_path / "keys"
    if content is not None:
        path.write_text(content)
    db = str(tmp_path / "runpoint.db")
    status, _, err = await runpoint(*command, "--db", db, "--encryption-keys", str(path))
    assert status == 2
    assert err.count("\n") == 1 and said in err, err


async def team_sealed(database: str) -> int:
    """How many message rows are sealed under a team key."""
    engine = create_async_engine(async_url(database))
    async with engine.connect() as conn:
        count = select(func.count()).where(func.substr(messages.c.data, 1, 1) == bytes([2]))
        found = int((await conn.execute(count)).scalar_one())
    await engine.dispose()
    return found


async def nothing_left(database: str, keys: str) -> None:
    """`rotate-key --check` finds every document under its team's key, every team key
    wrapped under the first key of `keys`."""
    status, out, _ = await runpoint(
        "db", "rotate-key", "--check", "--db", database, "--encryption-keys", keys
    )
    assert status == 0 and out.startswith("0 stored documents"), out


async def test_an_encryption_killed_midway_loses_nothing_and_resumes(
    database: str, tmp_path: Path
) -> None:
    async with Runpoint(agents, database=database, schedule=False) as rp:
        made = [
            await (
                await rp.create_run(CreateRun(agent_id="travel-agent", message=f"city {n}"))
            ).result()
            for n in range(RUNS)
        ]
    keys = keys_file(tmp_path / "keys", ("k1", OLD))
    process = await asyncio.create_subprocess_exec(
        COMMAND, "db", "encrypt", "--db", database, "--encryption-keys", keys, "--batch", "1"
    )
    # killed once it seals messages: the runs done, the messages begun, the rest to do
    while not await team_sealed(database):
        assert process.returncode is None, "the encryption ended before it was killed"
        await asyncio.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    assert await process.wait() == -signal.SIGKILL

    status, out, _ = await runpoint(
        "db", "rotate-key", "--check", "--db", database, "--encryption-keys", keys
    )
    assert status == 1 and ").data: in the clear" in out
    # encryption under way: the rows sealed and those in the clear both serve
    async with Runpoint(agents, database=database, keyring=Keyring({"k1": OLD})) as rp:
        for run in made:
            assert (await rp.get_run(run.run_id)).messages[0].content == run.input
    status, out, _ = await runpoint("db", "encrypt", "--db", database, "--encryption-keys", keys)
    assert status == 0 and "the database is encrypted" in out, out
    await nothing_left(database, keys)
    async with Runpoint(
        agents, database=database, keyring=Keyring({"k1": OLD}), schedule=False
    ) as rp:
        for run in made:
            detail = await rp.get_run(run.run_id)
            assert detail.messages[0].content == run.input
            assert detail.run.content == run.content


async def test_a_rotation_rewraps_the_team_keys(database: str, tmp_path: Path) -> None:
    async with Runpoint(
        agents, database=database, keyring=Keyring({"k1": OLD}), schedule=False
    ) as rp:
        approval, schedule_id = await paused(rp), await a_schedule(rp, "travel-agent")
        run = await (
            await rp.create_run(CreateRun(agent_id="travel-agent", message="Quito"))
        ).result()
    sealed = await team_sealed(database)
    # the old key removed too soon: the team's rows are the integrity error, --check says so
    new_only = keys_file(tmp_path / "new", ("k2", NEW))
    status, out, _ = await runpoint(
        "db", "rotate-key", "--check", "--db", database, "--encryption-keys", new_only
    )
    assert status == 1 and "team_keys(default).wrapped: under key 'k1'" in out, out
    async with Runpoint(agents, database=database, keyring=Keyring({"k2": NEW})) as rp:
        with pytest.raises(Unreadable, match="does not unwrap: sealed under key 'k1'"):
            await rp.storage.read_messages([Segment(run.run_id, 0)], 9)

    both = keys_file(tmp_path / "both", ("k2", NEW), ("k1", OLD))
    status, out, _ = await runpoint("db", "rotate-key", "--db", database, "--encryption-keys", both)
    assert status == 0 and "wrapped 1 team keys anew under key 'k2'" in out, out
    assert "the other keys may be removed" in out
    assert await team_sealed(database) == sealed  # no document was rewritten
    await nothing_left(database, new_only)
    async with Runpoint(
        agents, database=database, keyring=Keyring({"k2": NEW}), schedule=False
    ) as rp:
        detail = await rp.get_run(run.run_id)
        assert detail.messages[0].content == "Quito"
        assert (await rp.approvals.get(approval.id)).calls == approval.calls
        assert (await rp.schedules.get(schedule_id)).message == SECRETS[4]


async def test_db_encrypt_seals_what_was_in_the_clear(database: str, tmp_path: Path) -> None:
    async with Runpoint(agents, database=database, schedule=False) as rp:
        run = await (
            await rp.create_run(CreateRun(agent_id="travel-agent", message="Quito"))
        ).result()
        approval, schedule_id = await paused(rp), await a_schedule(rp, "travel-agent")
        messages_in_all = run.message_count + (await rp.queries.run(approval.run_id)).message_count
    keys = keys_file(tmp_path / "keys", ("k1", OLD))
    status, out, _ = await runpoint("db", "encrypt", "--db", database, "--encryption-keys", keys)
    assert status == 0 and "the database is encrypted" in out, out
    assert await team_sealed(database) == messages_in_all
    # encryption done: a row still in the clear would be refused
    async with Runpoint(
        agents, database=database, keyring=Keyring({"k1": OLD}), schedule=False
    ) as rp:
        assert (await rp.get_run(run.run_id)).messages[0].content == "Quito"
        assert (await rp.approvals.get(approval.id)).calls == approval.calls
        assert (await rp.schedules.get(schedule_id)).message == SECRETS[4]
