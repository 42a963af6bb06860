"""Fan-out: several new runs forked at once from one boundary of a run, each a branch with
its own overrides (model, instructions, input, edits), executed concurrently.

All or nothing: every branch is checked and laid out before anything is written, then the
runs are written in one transaction, then begun.
"""

from __future__ import annotations

import asyncio

import msgspec

from runpoint.core.errors import InvalidRequest
from runpoint.core.types import KeyClaim
from runpoint.durable import idempotency
from runpoint.reads import continue_points
from runpoint.reads.continue_points import ContinueFrom
from runpoint.runs.continuation import Branch, Continuation
from runpoint.runs.executor import RunHandle

MAX_BRANCHES = 8


class FanOut(msgspec.Struct, frozen=True, kw_only=True):
    """Fork `run_id` at `continue_from` into one new run per branch."""

    run_id: str
    branches: list[Branch]
    session_id: str | None = None
    agent_id: str | None = None
    continue_from: ContinueFrom = "end"
    background: bool = False


async def fan_out(
    continuation: Continuation, request: FanOut, claim: KeyClaim | None = None
) -> list[RunHandle]:
    """Start the branches' runs; each goes on without the caller. The write that makes
    them answers `claim` (their ids), if the request came with an Idempotency-Key."""
    if not 1 <= len(request.branches) <= MAX_BRANCHES:
        raise InvalidRequest(
            f"a fan-out makes 1 to {MAX_BRANCHES} runs, not {len(request.branches)}"
        )
    for branch in request.branches:
        continuation.check(branch)
    storage, executor = continuation.storage, continuation.executor
    source = await continuation.source(request.run_id, request.session_id, request.agent_id)
    agent = continuation.queries.agent(source.agent_id)
    index = await continue_points.named(storage, source, request.continue_from)
    index, _ = await continue_points.whole(storage, source, index)
    forks = await asyncio.gather(
        *(continuation.fork(agent, source, index, b) for b in request.branches)
    )
    for run, _, _ in forks:
        executor.accept(run, background=request.background, stream=False)
    runs = [run for run, _, _ in forks]
    await storage.create_runs(
        runs,
        {r.run_id: rows for r, rows, _ in forks},
        answering=idempotency.answering(claim, " ".join(r.run_id for r in runs)),
    )
    # begun together: no branch waits for another to start (each reads its event log first)
    return list(
        await asyncio.gather(
            *(
                executor.begin(agent, run, new, stream=False, background=request.background)
                for run, _, new in forks
            )
        )
    )
