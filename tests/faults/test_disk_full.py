"""SQLite on a small filesystem that fills: each write that fails for lack of space is a
507 STORAGE_FULL with Retry-After (not a 500), /ready is unready and says so, the metric
counts it, reads go on, and once space is freed everything works again without a restart.

The filesystem is a tmpfs of a few megabytes, mounted for the test (Linux, as root: CI
runs the tests so). Where it cannot be mounted the test is skipped saying why, unless
RUNPOINT_REQUIRE_MOUNT is set, which makes that an error."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient
from prometheus_client.parser import text_string_to_metric_families

from runpoint.adapters.litestar import RunpointApp, create_app
from runpoint.plugins.demo import agents

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


@pytest.fixture
async def client(small_disk: Path) -> AsyncIterator[AsyncTestClient[RunpointApp]]:
    app = create_app(agents, database=f"sqlite:///{small_disk / 'runpoint.db'}")
    async with AsyncTestClient(app) as client:
        yield client


def failures(scrape: str) -> dict[str, float]:
    return {
        sample.labels["kind"]: sample.value
        for family in text_string_to_metric_families(scrape)
        if family.name == "runpoint_storage_failures"
        for sample in family.samples
        if sample.name.endswith("_total")
    }


async def test_a_full_disk_is_named_and_outlived(
    client: AsyncTestClient[RunpointApp],
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
    ready = await client.get("/ready")
    assert ready.status_code == 503
    assert ready.json()["checks"]["database"].startswith("the database's storage is full")
    assert failures((await client.get("/metrics")).text)["full"] >= refused
    # reads go on
    run = before.json()
    read = await client.get(f"{RUNS}/{run['run_id']}", params={"session_id": run["session_id"]})
    assert read.status_code == 200 and read.json()["status"] == "COMPLETED"

    filler.unlink()
    assert (await client.get("/ready")).status_code == 200
    after = await client.post(RUNS, data={"message": "Lisbon", "stream": "false"})
    assert after.status_code == 200, after.text
    assert after.json()["status"] == "COMPLETED"
