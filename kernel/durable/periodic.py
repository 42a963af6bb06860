"""Work a server process does every so many seconds, in a task of its own, off the
request path (the retention sweeper, the schedule loop)."""

from __future__ import annotations

import abc
import asyncio
import logging

from runpoint.core.cancels import stop_if_cancelled, stopped


class Periodic(abc.ABC):
    """`once` every `every` seconds from `start` until `stop`; a pass that fails (an
    outage) is logged, and the next tries again, unless it failed because `stop`
    cancelled it (see runpoint.core.cancels)."""

    every: float
    name: str  # of its task, and of what its log says failed
    log: logging.Logger
    _task: asyncio.Task[None] | None = None

    @abc.abstractmethod
    async def once(self) -> object: ...

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self) -> None:
        if self._task is not None:
            await stopped(self._task)
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                await self.once()
            except Exception as error:
                stop_if_cancelled(error)  # a stop that surfaced as an error ends the loop
                self.log.exception("%s failed", self.name)
