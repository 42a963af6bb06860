"""SQLite on a small filesystem that fills: each write that fails for lack of space is a
507 STORAGE_FULL with Retry-After (not a 500), /ready is unready and says so, the metric
counts it, reads go on, and once space is freed everything works again without a restart.

The filesystem is a tmpfs of a few megabytes, mounted for the test (Linux, as root: CI
runs the tests so). Where it cannot be mounted the test is skipped saying why, unless
RUNPOINT_REQUIRE_MOUNT is set, which makes that an error."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import subprocess
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from prometheus_client.parser import text_string_to_metric_families

from runpoint.adapters.litestar import create_app
from runpoint.facade import Runpoint
from runpoint.plugins.demo import agents
from runpoint.plugins.scripted import ScriptedModel
from runpoint.plugins.sql import packing, packs
from runpoint.seams.agent import Agent, tool
from runpoint.seams.crew import Crew
from tests.faults.app import booked, count, plan
from tests.long_runs import AGENT, assert_read_back, packed, transcript
from tests.storage.test_lean_events import Handed

REQUIRE_ENV = "RUNPOINT_REQUIRE_MOUNT"
SIZE = "4m"
RUNS = "/agents/travel-agent/runs"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "disk"
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        why = f"cannot mount a {SIZE} tmpfs: {mounted.stderr.strip() or mounted.returncode}"
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set, but {why}")
        pytest.skip(why)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def fill(disk: Path) -> Path:
    """Take every free byte of the disk with one file; returns it (delete it to free)."""
    filler = disk / "filler"
    with open(filler, "wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
            out.flush()
    return filler


@contextlib.asynccontextmanager
async def client_on(
    disk: Path, served: Sequence[Agent], **options: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app serving `served` from a database on `disk`, in this event loop
    (a request under way does not hold up the next)."""
    app = create_app(served, database=f"sqlite:///{disk / 'runpoint.db'}", **options)
    transport = httpx.ASGITransport(app=app)
    async with LifespanManager(app), httpx.AsyncClient(transport=transport) as client:
        client.base_url = httpx.URL("http://test")
        yield client


@pytest.fixture
async def client(small_disk: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with client_on(small_disk, agents) as client:
        yield client


def failures(scrape: str) -> dict[str, float]:
    return {
        sample.labels["kind"]: sample.value
        for family in text_string_to_metric_families(scrape)
        if family.name == "runpoint_storage_failures"
        for sample in family.samples
        if sample.name.endswith("_total")
    }


async def assert_unready(client: httpx.AsyncClient, failed: int) -> None:
    """The server says why it is unready, and counts the writes that failed (`failed`)."""
    ready = await client.get("/ready")
    assert ready.status_code == 503
    assert ready.json()["checks"]["database"].startswith("the database's storage is full")
    assert failures((await client.get("/metrics")).text)["full"] >= failed


async def test_a_full_disk_is_named_and_outlived(
    client: httpx.AsyncClient,
    small_disk: Path,
) -> None:
    before = await client.post(RUNS, data={"message": "Paris", "stream": "false"})
    assert before.status_code == 200, before.text
    filler = fill(small_disk)

    refused = 0
    for n in range(20):  # the first writes may still find room in pages SQLite holds
        answer = await client.post(RUNS, data={"message": f"Rome {n}", "stream": "false"})
        if answer.status_code == 507:
            refused += 1
            assert answer.json()["error_code"] == "STORAGE_FULL"
            assert "storage is full" in answer.json()["detail"]
            assert int(answer.headers["retry-after"]) > 0
        else:
            assert answer.status_code == 200, answer.text
    assert refused, "no write failed on a full disk"
    await assert_unready(client, refused)
    # reads go on
    run = before.json()
    read = await client.get(f"{RUNS}/{run['run_id']}", params={"session_id": run["session_id"]})
    assert read.status_code == 200 and read.json()["status"] == "COMPLETED"

    filler.unlink()
    assert (await client.get("/ready")).status_code == 200
    after = await client.post(RUNS, data={"message": "Lisbon", "stream": "false"})
    assert after.status_code == 200, after.text
    assert after.json()["status"] == "COMPLETED"


class Disk:
    """The small disk, filled while the member books Tokyo (inside its tool batch: the
    booking's intent is written, its result is not yet)."""

    where = Path()
    filler: Path | None = None


@tool(effect="side-effect")
async def book(job: str, city: str) -> str:
    """Book a city for a job (a side effect, counted as the fault test's are)."""
    count(f"{job} {city}")
    if city == "Tokyo":
        Disk.filler = fill(Disk.where)
    return booked(job, city)


async def test_a_team_run_outlives_a_full_disk_in_its_members_tool_batch(
    small_disk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = tmp_path / "bookings.txt"  # not on the small disk
    monkeypatch.setenv("FAULTS_COUNTER", str(counter))
    monkeypatch.setattr(Disk, "where", small_disk)
    monkeypatch.setattr(Disk, "filler", None)
    team = [
        Agent(id="booker", model=ScriptedModel(plan, name="scripted:plan"), tools=[book]),
        Crew(id="booking-crew", model="scripted:lead", members=["booker"]),
    ]
    runs = "/teams/booking-crew/runs"
    # the member's writes are retried while the disk is full, within their lease
    async with client_on(small_disk, team, lease_seconds=30) as client:
        form = {"message": "full: Paris Tokyo Lagos", "stream": "false"}
        running = asyncio.create_task(client.post(runs, data=form))
        async with asyncio.timeout(30):
            while Disk.filler is None:  # noqa: ASYNC110 (the member's batch fills it)
                await asyncio.sleep(0.01)
        async with asyncio.timeout(10):  # a write of the team run's meets the full disk
            while not failures((await client.get("/metrics")).text).get("full"):  # noqa: ASYNC110 (polls the server)
                await asyncio.sleep(0.05)
        await assert_unready(client, 1)
        assert (await client.get("/teams/booking-crew")).status_code == 200  # reads go on
        assert not running.done()  # its writes wait for room
        Disk.filler.unlink()
        answer = await running
        assert answer.status_code == 200, answer.text
        run = answer.json()
        assert run["status"] == "COMPLETED", run
        assert run["content"] == "The team says: booker: full: all booked."
        got = await client.get(f"{runs}/{run['run_id']}", params={"session_id": run["session_id"]})
        (member,) = got.json()["member_responses"]
    # nothing half-written, no booking made twice
    assert counter.read_text().splitlines() == ["full Paris", "full Tokyo", "full Lagos"]
    for each in (run, member):
        messages = each["messages"]
        assert len({m["id"] for m in messages}) == len(messages)
        results = Counter(m["tool_call_id"] for m in messages if m["role"] == "tool")
        assert set(results.values()) == {1}
    assert len([m for m in member["messages"] if m["role"] == "tool"]) == 3


async def test_a_packing_that_meets_a_full_disk_leaves_its_rows_and_the_run_goes_on(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The disk fills as the run's first window is packed, after the save that completed
    it (the window's rows deleted, the pack not yet written): the packing is given up,
    the rows stay as they were, and the run's next save waits for room as any does; once
    there is room the run completes, the window is packed at its next save, and all
    reads back exactly."""
    database = f"sqlite:///{small_disk / 'runpoint.db'}"
    filled: list[Path] = []
    insert = packing._insert

    async def fill_then_insert(*args: Any) -> None:  # the window's rows deleted already
        if not filled:
            filled.append(fill(small_disk))
        await insert(*args)

    monkeypatch.setattr(packing, "_insert", fill_then_insert)
    caplog.set_level(logging.INFO, logger=packing.log.name)
    storage = Handed(database)
    runs, session = "/agents/long/runs", {"session_id": "long"}
    async with client_on(small_disk, [AGENT], storage=storage, lease_seconds=30) as client:
        form = {"message": "go", "stream": "false", **session}
        running = asyncio.create_task(client.post(runs, data=form))
        async with asyncio.timeout(30):  # the save after the packing waits for room
            while not failures((await client.get("/metrics")).text).get("full"):  # noqa: ASYNC110 (polls the server)
                await asyncio.sleep(0.05)
        (told,) = [r for r in caplog.records if "left unpacked" in r.getMessage()]
        assert "disk is full" in told.getMessage() and told.levelname == "INFO"
        run_id = str(told.args[0])  # type: ignore[index]
        await assert_unready(client, 1)
        assert not running.done()
        # reads go on, the window left unpacked among them
        got = await client.get(f"{runs}/{run_id}", params=session)
        assert got.status_code == 200 and got.json()["status"] == "RUNNING"
        so_far = [(m["role"], m["content"]) for m in got.json()["messages"]]
        assert len(so_far) > packs.WINDOW and so_far == transcript("go")[: len(so_far)]
        assert all(n == 1 for _, n in await packed(database, "messages", run_id))
        filled[0].unlink()
        answer = await running
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "COMPLETED"
    count = len(transcript("go"))
    assert await packed(database, "messages", run_id) == [
        (0, packs.WINDOW),
        (packs.WINDOW, count - packs.WINDOW),
    ]
    async with Runpoint([AGENT], database=database) as rp:  # nothing kept opened
        await assert_read_back(rp, run_id, "go", storage.handed)
