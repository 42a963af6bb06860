"""A cancel that reached a task as another error.

A task is stopped by cancelling it (a close stops the background loops so), and the
CancelledError is raised where it waits. Code on its way out may fail in turn and raise an
error of its own instead (a rollback sent on the connection that the interrupted statement
cost), which an `except Exception` that retries, logs or records a failure takes for an
ordinary one: a loop would go on, and whoever awaits the task (a close) waits for ever.
"""

from __future__ import annotations

import asyncio
from typing import Any


def stop_if_cancelled(error: Exception) -> None:
    """Raise CancelledError (from `error`, how the cancel surfaced) if the current task
    was asked to stop; else return, and `error` is an ordinary failure."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError from error


async def stopped(task: asyncio.Task[Any]) -> None:
    """Cancel `task` and wait for its end. Its end is waited for, not awaited: its own
    CancelledError is not raised here, so one raised here is aimed at the caller, and goes
    on (a `suppress(CancelledError)` around `await task` would swallow it)."""
    task.cancel()
    await asyncio.wait({task})
