"""Continue a crew run from a checkpoint inside one of its member runs.

History is never rewritten, so two runs are made, both copy-on-write:
- a new crew run, holding the leader's messages up to and with the turn that made the
  delegation, and the results of the calls made beside it (their runs are not run again);
- a new member run for that delegation (its id the one the new crew run's delegation
  looks up: `member_run_id`), forked from the member's run at the checkpoint, with the
  continue's input, edits and model. It is PENDING with no lease: nobody has executed it.

The new crew run starts where its transcript ends, at the delegation without an answer:
its delegation finds the new member run and executes it, and the leader goes on with
the member's new answer.
"""

from __future__ import annotations

from itertools import takewhile

import msgspec

from runpoint.core.errors import Conflict, InvalidRequest, NotFound
from runpoint.core.types import KeyClaim, new_id
from runpoint.durable import idempotency
from runpoint.reads import continue_points, run_trees
from runpoint.runs.continuation import Branch, Continuation, ContinueRun
from runpoint.runs.executor import RunHandle
from runpoint.seams.crew import Crew, member_run_id


async def start(
    continuation: Continuation,
    request: ContinueRun,
    member: str,
    stream: bool,
    claim: KeyClaim | None,
) -> RunHandle:
    """A new crew run and member run from `member` at `request.continue_from`, with the
    request's input, edits and model."""
    if request.regenerate or request.replace_original is not None:
        raise InvalidRequest(
            "a continue from a member's checkpoint takes no regenerate or replace_original"
        )
    storage = continuation.storage
    source = await continuation.source(request.run_id, request.session_id, request.agent_id)
    crew = continuation.queries.agent(source.agent_id)
    if not isinstance(crew, Crew):
        raise NotFound(f"team run {source.run_id} not found")
    branch = Branch(input=request.input, edits=request.edits, model=request.model)
    continuation.check(branch)
    found, messages = await run_trees.member(storage, source, member)
    if found.call_index is None:  # its turn is not in the transcript read (see Member)
        raise Conflict(
            f"member run {member} is under way in a turn its team run has not written yet; "
            "continue from it once the team run reaches its next boundary"
        )
    agent = continuation.queries.agent(found.run.agent_id)
    index = await continue_points.named(storage, found.run, request.continue_from)
    index, _ = await continue_points.whole(storage, found.run, index)

    cut = found.call_index + 1  # the leader's messages up to the turn that delegated
    beside = [
        msgspec.structs.replace(m, id=new_id())
        for m in takewhile(lambda m: m.role == "tool", messages[cut:])
        if m.tool_call_id != found.tool_call_id
    ]
    # a fork of the leader's run cut in that turn, with the results beside its own rows
    crew_run, _, _ = await continuation.fork(crew, source, cut, Branch())
    crew_run = msgspec.structs.replace(crew_run, message_count=cut + len(beside))
    crew_run_id = crew_run.run_id
    forked, rows, _ = await continuation.fork(
        agent, found.run, index, branch, run_id=member_run_id(crew_run_id, found.tool_call_id)
    )
    member_run = msgspec.structs.replace(
        forked, parent_run_id=crew_run_id, parent_tool_call_id=found.tool_call_id
    )
    continuation.executor.accept(crew_run, background=request.background, stream=stream)
    await storage.create_runs(
        [crew_run, member_run],
        {crew_run_id: beside, member_run.run_id: rows},
        answering=idempotency.answering(claim, crew_run_id),
    )
    return await continuation.executor.begin(
        crew, crew_run, [], stream=stream, background=request.background
    )
