"""runpoint from Python, without HTTP: `runpoint.open(database, agents=...)`.

`async with` it gives the `Runpoint` facade itself, opened (migrations, lease watch, run
queue, sweeper) and closed after: the very calls, types and errors the HTTP adapter makes
and maps. `with` it, in code that is not async (a script, a notebook), gives a `Blocking`
front on the same facade, whose event loop runs in a thread of its own."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import AsyncGenerator, Awaitable, Coroutine, Iterable, Iterator
from typing import Any, TypeVar

from runpoint.core.types import Run, RunEvent
from runpoint.facade import Runpoint
from runpoint.runs.commands import CreateRun
from runpoint.runs.continuation import ContinueRun
from runpoint.runs.executor import RunHandle
from runpoint.runs.fan_out import FanOut
from runpoint.seams.agent import Agent

T = TypeVar("T")


def open(database: str, *, agents: Iterable[Agent], **options: Any) -> Opened:
    """runpoint on `database` (a SQLite file's path, `sqlite:///PATH`, `postgresql://...`
    or `memory:`) serving `agents`; `options` are `Runpoint`'s (lease_seconds, ...)."""
    return Opened(database, list(agents), options)


class Opened:
    """What `open` gives: `async with` it for the `Runpoint`, `with` it for a `Blocking`."""

    def __init__(self, database: str, agents: list[Agent], options: dict[str, Any]) -> None:
        self._made = functools.partial(Runpoint, agents, database=database, **options)
        self._rp: Runpoint | None = None
        self._blocking: Blocking | None = None

    async def __aenter__(self) -> Runpoint:
        self._rp = await self._made().open()
        return self._rp

    async def __aexit__(self, *exc: object) -> None:
        assert self._rp is not None
        await self._rp.close()

    def __enter__(self) -> Blocking:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="runpoint", daemon=True)
        thread.start()
        try:
            rp = asyncio.run_coroutine_threadsafe(self._opened(), loop).result()
        except BaseException:
            _stop(loop, thread)
            raise
        self._blocking = Blocking(rp, loop, thread)
        return self._blocking

    def __exit__(self, *exc: object) -> None:
        assert self._blocking is not None
        self._blocking.close()

    async def _opened(self) -> Runpoint:
        return await self._made().open()  # made in its loop's thread, as it will run there


class Blocking:
    """The `Runpoint` facade for code that is not async: each call waits for its answer.
    `create_run`, `continue_run` and `fan_out` wait for their runs to stop (a background
    one's is its first state) and return them; `stream` and `follow` give a run's events
    as they come. Any other method of the facade is here too, waited for."""

    def __init__(self, rp: Runpoint, loop: asyncio.AbstractEventLoop, thread: threading.Thread):
        self.runpoint = rp
        self._loop = loop
        self._thread = thread

    def wait(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` (a coroutine of the facade's, say) in runpoint's loop, and wait."""
        return asyncio.run_coroutine_threadsafe(work, self._loop).result()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.runpoint, name)
        if not inspect.iscoroutinefunction(found):
            return found
        return functools.wraps(found)(lambda *args, **kwargs: self.wait(found(*args, **kwargs)))

    def create_run(self, request: CreateRun, *, idempotency_key: str | None = None) -> Run:
        started = self.runpoint.create_run(request, idempotency_key=idempotency_key)
        return self.wait(_ended(started, request.background))

    def continue_run(self, request: ContinueRun, *, idempotency_key: str | None = None) -> Run:
        started = self.runpoint.continue_run(request, idempotency_key=idempotency_key)
        return self.wait(_ended(started, request.background))

    def fan_out(self, request: FanOut, *, idempotency_key: str | None = None) -> list[Run]:
        async def ended() -> list[Run]:
            handles = await self.runpoint.fan_out(request, idempotency_key=idempotency_key)
            if request.background:
                return [h.run for h in handles]
            return list(await asyncio.gather(*(h.result() for h in handles)))

        return self.wait(ended())

    def stream(self, request: CreateRun | ContinueRun) -> Iterator[RunEvent]:
        """Start a run (or continue one) and give its events as they come."""

        async def events() -> AsyncGenerator[RunEvent]:
            if isinstance(request, CreateRun):
                handle = await self.runpoint.create_run(request, stream=True)
            else:
                handle = await self.runpoint.continue_run(request, stream=True)
            async for event in handle.events():
                yield event

        return self._iterate(events())

    def follow(self, run_id: str, **options: Any) -> Iterator[RunEvent]:
        """Join a run's events (see `Runpoint.follow`), from any process's run."""

        async def events() -> AsyncGenerator[RunEvent]:
            async for batch in await self.runpoint.follow(run_id, **options):
                for event in batch:
                    yield event

        return self._iterate(events())

    def _iterate(self, events: AsyncGenerator[RunEvent]) -> Iterator[RunEvent]:
        try:
            while True:
                try:
                    yield self.wait(_next(events))
                except StopAsyncIteration:
                    return
        finally:
            self.wait(_closed(events))

    def close(self) -> None:
        try:
            self.wait(self.runpoint.close())
        finally:
            _stop(self._loop, self._thread)


async def _ended(started: Awaitable[RunHandle], background: bool) -> Run:
    handle = await started
    return handle.run if background else await handle.result()


async def _next(events: AsyncGenerator[RunEvent]) -> RunEvent:
    return await anext(events)


async def _closed(events: AsyncGenerator[RunEvent]) -> None:
    await events.aclose()


def _stop(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    loop.call_soon_threadsafe(loop.stop)
    thread.join()
    loop.close()
