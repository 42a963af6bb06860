"""Diffs between two boundaries, of one run or of two runs of one tree: messages added,
removed and edited, tool calls, status and usage, read only past the common ancestor."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from runpoint.core.errors import InvalidBoundary, NotFound
from runpoint.core.types import Message, RunStatus, Segment
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import agents
from runpoint.runs.edits import ReplaceToolResult, ReplaceUserMessage
from tests.conftest import OpenRunpoint


@pytest.fixture
async def rp(open_runpoint: OpenRunpoint) -> Runpoint:
    return await open_runpoint(agents)


async def looked_up(rp: Runpoint) -> str:
    """Paris, then Tokyo, a batch each, then the answer: six messages, checkpoints at 3,
    5 and 6."""
    run = await (
        await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris and Tokyo"))
    ).result()
    assert run.status is RunStatus.COMPLETED and run.message_count == 6
    return run.run_id


def reads(rp: Runpoint) -> list[tuple[int, int]]:
    """Every (start, upto) the storage is asked to read messages for, from now on."""
    storage = rp.storage
    asked: list[tuple[int, int]] = []
    read = storage.read_messages

    async def counted(segments: Sequence[Segment], upto: int, start: int = 0) -> list[Message]:
        asked.append((start, upto))
        return await read(segments, upto, start)

    storage.read_messages = counted  # type: ignore[method-assign]
    return asked


async def test_two_boundaries_of_one_run(rp: Runpoint) -> None:
    run_id = await looked_up(rp)
    diff = await rp.diff(run_id, message_index=3)
    assert diff.common_index == 3
    assert [(i.message_index, i.message.role) for i in diff.added] == [
        (3, "assistant"),
        (4, "tool"),
        (5, "assistant"),
    ]
    assert (diff.removed, diff.edited) == ([], [])
    [tokyo] = diff.tools
    assert tokyo.base is None and tokyo.other is not None
    assert (tokyo.other.tool_args, tokyo.other.result) == ({"city": "Tokyo"}, "13.9M")
    assert (diff.base.status, diff.other.status) == (RunStatus.RUNNING, RunStatus.COMPLETED)
    assert diff.base.usage.output_tokens == 0 and diff.other.usage.output_tokens > 0
    # the other way round, the same changes are removals
    back = await rp.diff(run_id, other_message_index=3)
    assert [i.message_index for i in back.removed] == [3, 4, 5] and back.added == []


async def test_an_edited_fork_against_its_source(rp: Runpoint) -> None:
    source = await looked_up(rp)
    paris = (await rp.get_run(source)).tools[0]
    edit = ReplaceToolResult(paris.tool_call_id, "99M")
    fork = (
        await (
            await rp.continue_run(ContinueRun(run_id=source, continue_from=3, edits=[edit]))
        ).result()
    ).run_id
    asked = reads(rp)
    diff = await rp.diff(source, other_run_id=fork)
    assert diff.common_index == 2
    [edited] = diff.edited
    assert (edited.base.message_index, edited.base.message.content) == (2, "2.1M")
    assert (edited.other.message_index, edited.other.message.content) == (2, "99M")
    # the fork's answer and its own Tokyo lookup are new; the source's are gone
    assert [i.message_index for i in diff.added] == [3, 4, 5]
    assert [i.message_index for i in diff.removed] == [3, 4, 5]
    changed = {(c.base and c.base.result, c.other and c.other.result) for c in diff.tools}
    assert ("2.1M", "99M") in changed
    # nothing below the common ancestor was read
    assert all(start >= 2 for start, _ in asked), asked


async def test_sibling_forks_part_at_their_common_checkpoint(rp: Runpoint) -> None:
    source = await looked_up(rp)
    forks = [
        (
            await (
                await rp.continue_run(ContinueRun(run_id=source, continue_from=3, input=text))
            ).result()
        ).run_id
        for text in ("And Lagos?", "And Kyoto?")
    ]
    diff = await rp.diff(forks[0], other_run_id=forks[1])
    assert diff.common_index == 3
    assert diff.added[0].message.content == "And Kyoto?"
    assert diff.removed[0].message.content == "And Lagos?"
    assert {c.other.tool_args["city"] for c in diff.tools if c.other} == {"Kyoto"}
    assert {c.base.tool_args["city"] for c in diff.tools if c.base} == {"Lagos"}


async def test_a_user_message_edited_from_its_boundary(rp: Runpoint) -> None:
    source = await looked_up(rp)
    edit = ReplaceUserMessage("Kyoto")
    fork = (
        await (
            await rp.continue_run(ContinueRun(run_id=source, continue_from=1, edits=[edit]))
        ).result()
    ).run_id
    diff = await rp.diff(fork, other_run_id=source)  # from the fork to its source
    [edited] = diff.edited
    assert (edited.base.message.content, edited.other.message.content) == (
        "Kyoto",
        "Paris and Tokyo",
    )
    assert diff.common_index == 0


async def test_bad_boundaries_and_unknown_runs(rp: Runpoint) -> None:
    run_id = await looked_up(rp)
    with pytest.raises(InvalidBoundary, match=r"0\.\.6"):
        await rp.diff(run_id, message_index=7)
    with pytest.raises(NotFound):
        await rp.diff(run_id, other_run_id="nope")
    with pytest.raises(NotFound):
        await rp.diff(run_id, agent_id="booking-agent")
