"""Fan-out: one request forks up to 8 runs from one boundary, each with its own model,
instructions, input and edits, run concurrently; all or nothing, and idempotent with a
key."""

from __future__ import annotations

import asyncio

import pytest

from runpoint.core.errors import ConfigurationError, InvalidRequest
from runpoint.core.types import RunStatus
from runpoint.facade import CreateRun, FanOut, Runpoint
from runpoint.plugins.scripted import ScriptedModel
from runpoint.runs.continuation import Branch
from runpoint.runs.edits import ReplaceUserMessage
from runpoint.runs.fan_out import MAX_BRANCHES
from runpoint.seams.agent import Agent
from runpoint.seams.model import ModelRequest, ModelResponse
from tests.conftest import OpenRunpoint


def say(request: ModelRequest) -> ModelResponse:
    """Answer with the instructions and every user message the model sees."""
    said = [m.content for m in request.messages if m.role == "user"]
    return ModelResponse(content=f"{request.instructions}: {' / '.join(map(str, said))}")


@pytest.fixture
async def rp(open_runpoint: OpenRunpoint) -> Runpoint:
    return await open_runpoint([Agent("sayer", ScriptedModel(say), instructions="Be brief")])


async def session_of(rp: Runpoint) -> tuple[str, str]:
    run = await (await rp.create_run(CreateRun(agent_id="sayer", message="Hello"))).result()
    assert run.content == "Be brief: Hello"
    return run.run_id, run.session_id


async def test_each_branch_runs_with_its_own_overrides(rp: Runpoint) -> None:
    source, session = await session_of(rp)
    branches = [
        Branch(input="And Paris?"),
        Branch(input="And Tokyo?", instructions="Be long"),
        Branch(edits=[ReplaceUserMessage("Goodbye")], input="Really?"),
        Branch(input="Echo me", model="scripted:echo"),
    ]
    handles = await rp.fan_out(FanOut(run_id=source, branches=branches, continue_from=2))
    runs = [await h.result() for h in handles]
    assert [r.status for r in runs] == [RunStatus.COMPLETED] * 4
    assert [r.content for r in runs] == [
        "Be brief: Hello / And Paris?",
        "Be long: Hello / And Tokyo?",
        "Be brief: Goodbye / Really?",
        "Echo me",
    ]
    assert {(r.forked_from_run_id, r.forked_from_message_index) for r in runs} == {(source, 2)}
    assert [r.model for r in runs][3] == "scripted:echo"
    assert [e.kind for e in (await rp.get_run(runs[2].run_id)).run.edits] == ["user_message"]
    assert len(await rp.list_runs(session)) == 5


async def test_one_bad_branch_starts_none(rp: Runpoint) -> None:
    source, session = await session_of(rp)
    with pytest.raises(ConfigurationError):
        await rp.fan_out(
            FanOut(
                run_id=source, branches=[Branch(input="ok"), Branch(input="x", model="nope:model")]
            )
        )
    with pytest.raises(InvalidRequest, match="no user message before message 0"):
        await rp.fan_out(
            FanOut(
                run_id=source,
                branches=[Branch(input="ok"), Branch(edits=[ReplaceUserMessage("x")])],
                continue_from=0,
            )
        )
    with pytest.raises(InvalidRequest, match="1 to 8 runs, not 9"):
        await rp.fan_out(FanOut(run_id=source, branches=[Branch(input=str(i)) for i in range(9)]))
    assert len(await rp.list_runs(session)) == 1


async def test_a_retry_with_the_same_key_gets_the_same_runs(rp: Runpoint) -> None:
    source, session = await session_of(rp)
    branches = [Branch(input="One"), Branch(input="Two")]
    first = await rp.fan_out(FanOut(run_id=source, branches=branches), idempotency_key="k1")
    again = await rp.fan_out(FanOut(run_id=source, branches=branches), idempotency_key="k1")
    assert [h.run.run_id for h in again] == [h.run.run_id for h in first]
    assert all(h.replayed for h in again)
    with pytest.raises(InvalidRequest, match="another request"):
        await rp.fan_out(FanOut(run_id=source, branches=branches[:1]), idempotency_key="k1")
    for handle in first:
        await handle.result()
    assert len(await rp.list_runs(session)) == 3


async def test_the_branches_run_at_once_not_one_after_another(
    open_runpoint: OpenRunpoint,
) -> None:
    """Each branch's model turn waits until every branch is in its own: branches run one
    after another would never get there."""
    together = asyncio.Barrier(MAX_BRANCHES)

    async def meet(request: ModelRequest) -> ModelResponse:
        if any(m.content == "branch" for m in request.messages):
            await asyncio.wait_for(together.wait(), timeout=10)
        return ModelResponse(content="met")

    rp = await open_runpoint([Agent("meeter", ScriptedModel(meet))])
    source = await (await rp.create_run(CreateRun(agent_id="meeter", message="Hello"))).result()
    handles = await rp.fan_out(
        FanOut(run_id=source.run_id, branches=[Branch(input="branch")] * MAX_BRANCHES)
    )
    runs = [await h.result() for h in handles]
    assert [(r.status, r.content) for r in runs] == [(RunStatus.COMPLETED, "met")] * MAX_BRANCHES
