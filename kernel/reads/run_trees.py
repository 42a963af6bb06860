"""A crew run's tree, read: the member runs of its leader's delegations, and its timeline
with each member's checkpoints under the leader's checkpoint that follows its delegation.

A crew run's member runs are found through its lineage: a fork (or a continue from a
member's checkpoint) inherits its source's messages, delegations included, and so the
member runs that answered them; a member run of its own answers a call in its place (a
continue from a member's checkpoint makes one for the delegation it goes back to).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from runpoint.core.errors import NotFound
from runpoint.core.types import Checkpoint, Message, Run
from runpoint.seams.storage import Storage


class Member(msgspec.Struct):
    """A member run of a crew run: the leader's delegation `tool_call_id`, made in its
    message `call_index` (None if the transcript read has no such turn: one written
    after it was read, or a run from before delegating turns were written before their
    members started) and answered in `result_index` (None while unanswered)."""

    run: Run
    tool_call_id: str
    call_index: int | None
    result_index: int | None


class MemberTimeline(msgspec.Struct):
    member: Member
    checkpoints: list[Checkpoint]


class TreeTimeline(msgspec.Struct):
    """The crew run's checkpoints, each with the member runs of the delegations it is the
    first checkpoint after; `pending`: those no checkpoint follows yet."""

    run: Run
    checkpoints: list[tuple[Checkpoint, list[MemberTimeline]]]
    pending: list[MemberTimeline]


async def members(storage: Storage, run: Run, messages: Sequence[Message]) -> list[Member]:
    """The member runs of the crew run's delegations in `messages` (its transcript), in
    the order the leader made them."""
    by_call: dict[str, Run] = {}
    for source in dict.fromkeys(s.run_id for s in run.segments):  # its ancestors', then its own
        for member in await storage.member_runs(source):
            by_call[member.parent_tool_call_id or ""] = member
    answered = {m.tool_call_id: i for i, m in enumerate(messages) if m.role == "tool"}
    found = [
        Member(by_call.pop(call.id), call.id, index, answered.get(call.id))
        for index, message in enumerate(messages)
        if message.role == "assistant"
        for call in message.tool_calls or ()
        if call.id in by_call
    ]
    # its own delegations whose turn the transcript read does not hold (see Member)
    return found + [
        Member(m, call_id, None, None)
        for call_id, m in by_call.items()
        if m.parent_run_id == run.run_id
    ]


async def member(storage: Storage, run: Run, member_run_id: str) -> tuple[Member, list[Message]]:
    """The crew run's member run `member_run_id`, with the crew run's transcript; NotFound
    if it is not one of the run's (another crew run's, say)."""
    messages = await storage.read_messages(run.segments, run.message_count)
    for found in await members(storage, run, messages):
        if found.run.run_id == member_run_id:
            return found, messages
    raise NotFound(f"member run {member_run_id} not found in team run {run.run_id}")


async def timeline(storage: Storage, run: Run) -> TreeTimeline:
    checkpoints = await storage.list_checkpoints(run.segments)
    messages = await storage.read_messages(run.segments, run.message_count)
    under: list[list[MemberTimeline]] = [[] for _ in checkpoints]
    pending: list[MemberTimeline] = []
    for found in await members(storage, run, messages):
        node = MemberTimeline(found, await storage.list_checkpoints(found.run.segments))
        answered = found.result_index
        after = (
            None
            if answered is None
            else next((i for i, c in enumerate(checkpoints) if c.message_index > answered), None)
        )
        (pending if after is None else under[after]).append(node)
    return TreeTimeline(run, list(zip(checkpoints, under, strict=True)), pending)
