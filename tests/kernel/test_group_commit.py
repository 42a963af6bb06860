"""The group commit that tool results and event appends are written through."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Sequence

import pytest

from runpoint.core.group_commit import GroupCommit


class SlowWrites:
    """Writes that wait for `gate`, answering each item with its length."""

    def __init__(self) -> None:
        self.groups: list[list[str]] = []
        self.gate = asyncio.Event()

    async def write(self, items: Sequence[str]) -> list[int]:
        self.groups.append(list(items))
        await self.gate.wait()
        return [len(item) for item in items]


async def started(commit: GroupCommit[str, int], item: str) -> asyncio.Task[int]:
    """A caller's submit, let run until it waits."""
    task = asyncio.create_task(commit.submit(item))
    for _ in range(3):
        await asyncio.sleep(0)
    return task


async def test_items_that_come_during_a_write_go_together_in_the_next() -> None:
    writes = SlowWrites()
    commit = GroupCommit(writes.write)
    first = await started(commit, "a")
    later = [await started(commit, item) for item in ("bb", "ccc", "dddd")]
    writes.gate.set()
    assert await asyncio.gather(first, *later) == [1, 2, 3, 4]
    assert writes.groups == [["a"], ["bb", "ccc", "dddd"]]


async def test_items_that_come_together_share_one_write() -> None:
    writes = SlowWrites()
    writes.gate.set()
    commit = GroupCommit(writes.write)
    assert await asyncio.gather(*(commit.submit(i) for i in ("a", "bb", "ccc"))) == [1, 2, 3]
    assert writes.groups == [["a", "bb", "ccc"]]


async def test_a_failed_write_fails_every_item_it_held_and_no_other() -> None:
    failing = {"bb"}

    async def write(items: Sequence[str]) -> list[int]:
        await asyncio.sleep(0)
        if failing & set(items):
            raise OSError("the disk is gone")
        return [len(item) for item in items]

    commit = GroupCommit(write)
    held = await asyncio.gather(*(commit.submit(i) for i in ("a", "bb")), return_exceptions=True)
    assert [str(outcome) for outcome in held] == ["the disk is gone"] * 2
    assert await commit.submit("ccc") == 3  # the next write is a write of its own


async def test_an_error_as_an_item_s_answer_is_raised_to_its_caller_alone() -> None:
    async def write(items: Sequence[str]) -> list[int | Exception]:
        return [ValueError(item) if item == "bb" else len(item) for item in items]

    commit = GroupCommit(write)
    a, bb, ccc = (asyncio.create_task(commit.submit(i)) for i in ("a", "bb", "ccc"))
    with pytest.raises(ValueError, match="bb"):
        await bb
    assert (await a, await ccc) == (1, 3)


async def test_a_caller_that_gives_up_leaves_the_write_to_finish_for_the_others() -> None:
    writes = SlowWrites()
    commit = GroupCommit(writes.write)
    await started(commit, "a")  # the write in flight
    leaving, staying = await started(commit, "bb"), await started(commit, "ccc")
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    writes.gate.set()
    assert await staying == 3
    assert writes.groups == [["a"], ["bb", "ccc"]]  # what left was written all the same


async def test_the_failed_answer_of_a_caller_that_gave_up_is_not_reported_as_lost() -> None:
    reported: list[dict[str, object]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _, context: reported.append(context))
    gate = asyncio.Event()

    async def write(items: Sequence[str]) -> list[int]:
        await gate.wait()
        raise OSError("the disk is gone")

    commit = GroupCommit(write)
    leaving, staying = await started(commit, "a"), await started(commit, "bb")
    leaving.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leaving
    gate.set()
    with pytest.raises(OSError, match="the disk is gone"):
        await staying
    del leaving, staying
    gc.collect()
    assert reported == []
