"""A group commit: what comes while a write is under way goes together in the next write,
and each caller gets the outcome of the write that held its item. A caller waits for
nothing it would not have waited for alone (the write in flight at most), and a write costs
the database one commit whatever its rows, so writes that come together cost one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

Item = TypeVar("Item")
Answer = TypeVar("Answer")


class GroupCommit(Generic[Item, Answer]):
    """`write` writes a group of items in one write and answers for each, in order: an
    exception as an item's answer is raised to its caller alone."""

    def __init__(
        self, write: Callable[[Sequence[Item]], Awaitable[Sequence[Answer | Exception]]]
    ) -> None:
        self._write = write
        self._waiting: list[tuple[Item, asyncio.Future[Answer]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, item: Item) -> Answer:
        """`item`'s answer once it is written; an error of its write is raised to every
        caller whose item went in it."""
        done: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        # the answer of a caller that gave up is nobody's: taking it here keeps asyncio from
        # reporting its error as never retrieved; a caller still waiting gets it all the same
        done.add_done_callback(_taken)
        self._waiting.append((item, done))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_waiting(), name="group commit")
        # a caller that gives up leaves the write to finish: it may hold others' items, and
        # what it records (a tool's result, an event) stays true
        return await asyncio.shield(done)

    async def _write_waiting(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                try:
                    answers = await self._write([item for item, _ in group])
                except Exception as error:
                    for _, done in group:
                        done.set_exception(error)
                except asyncio.CancelledError:  # the loop is closing: nothing waits for more
                    for _, done in group + self._waiting:
                        done.cancel()
                    raise
                else:
                    for (_, done), answer in zip(group, answers, strict=True):
                        if isinstance(answer, Exception):
                            done.set_exception(answer)
                        else:
                            done.set_result(answer)
        finally:
            self._writer = None


def _taken(answer: asyncio.Future[Any]) -> None:
    if not answer.cancelled():
        answer.exception()
