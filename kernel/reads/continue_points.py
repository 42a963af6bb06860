"""Where a continue starts: the boundary a request names, read off a run's stored transcript
without reading all of it (a run may hold thousands of messages).

A boundary k keeps `messages[:k]`; a whole one splits no tool call from its result.
"""

from __future__ import annotations

from typing import Literal

from runpoint.core import transcript
from runpoint.core.errors import InvalidBoundary
from runpoint.core.types import Message, Run
from runpoint.seams.storage import Storage

ContinueFrom = Literal["end", "last_user"] | int


async def named(storage: Storage, run: Run, continue_from: ContinueFrom) -> int:
    """The boundary `continue_from` names; InvalidBoundary if the run has no such one."""
    count = run.message_count
    if continue_from == "end":
        return count
    if continue_from == "last_user":
        index = await storage.last_index(run.segments, count, "user")
        if index is None:
            raise InvalidBoundary("the run has no user message to continue from")
        return index + 1
    if not 0 <= continue_from <= count:
        raise InvalidBoundary(
            f"continue_from {continue_from} is outside this run's boundaries 0..{count}"
        )
    return continue_from


async def before_final_answer(storage: Storage, run: Run) -> int:
    """The boundary before the run's trailing answers (assistant turns without tool calls)."""
    index = run.message_count
    while index > 0:
        [last] = await storage.read_messages(run.segments, index, start=index - 1)
        if last.role != "assistant" or last.tool_calls:
            break
        index -= 1
    return index


async def whole(storage: Storage, run: Run, index: int) -> tuple[int, list[Message]]:
    """The whole boundary at or below `index`, and the messages from the last assistant turn
    before `index` up to it: all that decides both, and which of its calls await results."""
    start = await storage.last_index(run.segments, index, "assistant") or 0
    turn = await storage.read_messages(run.segments, index, start=start)
    return start + transcript.safe_boundary(turn, len(turn)), turn


async def calls_in_doubt(storage: Storage, run: Run) -> list[str]:
    """The calls of the run's last turn that started (their intent was recorded) and never
    ended: their process died in them, so they may or may not have acted."""
    _, turn = await whole(storage, run, run.message_count)
    calls = transcript.unanswered_calls(turn)
    records = await storage.tool_records(run.run_id, [c.id for c in calls])
    return [c.id for c in calls if c.id in records and records[c.id] is None]
