"""The run queue seam: how a run accepted by one process is executed by any process.

A storage backend shared by several processes may come with a queue (a plugin registers
it by database URL scheme, like storage). Then a background run is accepted durably (its
row, its input, a person's tool decisions) and put on the queue; whichever process takes
the job claims the run by its revision and executes it. Without a queue, a process
executes the runs it accepts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Protocol, runtime_checkable

import msgspec


class QueuedRun(msgspec.Struct, frozen=True):
    """A job: execute this PENDING run. All it needs (its input, a person's tool
    decisions) was written with the run, for whoever executes it."""

    run_id: str
    agent_id: str


class RunQueue(Protocol):
    async def open(
        self, agent_ids: Collection[str], execute: Callable[[QueuedRun], Awaitable[None]]
    ) -> None:
        """Start taking this process's share of the jobs for these agents: `execute` is
        awaited for each, and the job is done when it returns. Called after storage opened."""

    async def close(self) -> None:
        """Stop taking jobs; a job under way is abandoned (its run keeps its lease)."""

    async def put(self, job: QueuedRun) -> None:
        """Queue a job durably, for any process serving its agent."""


@runtime_checkable
class Watched(Protocol):
    """Optional: a queue that can say whether it is open and consuming (readiness)."""

    async def health(self) -> str:
        """ "ok", or what keeps it from taking jobs now."""


@runtime_checkable
class Measured(Protocol):
    """Optional: a queue that can say how many jobs wait (for metrics)."""

    async def waiting(self) -> dict[str, int]:
        """The jobs queued and not yet taken, by agent id."""


# A run queue is built from the database URL its storage uses.
RunQueueFactory = Callable[[str], RunQueue]
