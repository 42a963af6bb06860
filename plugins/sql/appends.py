"""Event appends of a process's runs, written together: appends that come while one is being
written wait for it, then go in one write (one statement on PostgreSQL, one transaction on
SQLite), a group commit across runs. Each run's own log already gathers its events while
its last write goes (kernel/event_log.py); this gathers the runs' writes. An append waits
for nothing that it would not have waited for alone, the write in flight at most, and is
durable when it returns, as before; a write costs the database a commit (PostgreSQL: a
flushed one), whatever its rows."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import NamedTuple

from runpoint.types import Run


class Append(NamedTuple):
    """Event rows (seq, document) for `run`, written only while its revision is the run's."""

    run: Run
    events: Sequence[tuple[int, bytes]]


# writes appends in one write; says of each whether it was written (its run's revision)
WriteAppends = Callable[[Sequence[Append]], Awaitable[Sequence[bool]]]


class GroupAppends:
    def __init__(self, write: WriteAppends) -> None:
        self._write = write
        self._waiting: list[tuple[Append, asyncio.Future[bool]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def append(self, append: Append) -> bool:
        """Whether `append` was written; an error of its write is raised to every append
        that went in it."""
        done = asyncio.get_running_loop().create_future()
        self._waiting.append((append, done))
        if self._writer is None:
            self._writer = asyncio.create_task(self._write_waiting(), name="event appends")
        # a caller that gives up leaves the write to finish: the others share it
        return await asyncio.shield(done)

    async def _write_waiting(self) -> None:
        try:
            while self._waiting:
                group, self._waiting = self._waiting, []
                try:
                    written = await self._write([append for append, _ in group])
                except Exception as error:
                    for _, done in group:
                        done.set_exception(error)
                except asyncio.CancelledError:  # the loop is closing: nothing waits for more
                    for _, done in group + self._waiting:
                        done.cancel()
                    raise
                else:
                    for (_, done), answer in zip(group, written, strict=True):
                        done.set_result(answer)
        finally:
            self._writer = None
