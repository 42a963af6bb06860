"""Tree-aware context: the exact messages the model receives for forks and new runs."""

from __future__ import annotations

import pytest

from runpoint.facade import ContinueRun, CreateRun
from runpoint.plugins.scripted import ScriptedModel
from runpoint.seams.agent import Agent
from runpoint.seams.model import ModelRequest, ModelResponse
from tests.conftest import OpenRunpoint

pytestmark = pytest.mark.memory  # storage is not the subject here


class Recorder:
    """An echo model that remembers what it was shown."""

    def __init__(self) -> None:
        self.seen: list[list[tuple[str, str | None]]] = []

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.seen.append([(m.role, m.content) for m in request.messages])
        return ModelResponse(content=f"re: {request.messages[-1].content}")


def turn(text: str) -> list[tuple[str, str | None]]:
    return [("user", text), ("assistant", f"re: {text}")]


async def test_forks_see_their_prefix_and_the_history_before_their_source(
    open_runpoint: OpenRunpoint,
) -> None:
    recorder = Recorder()
    rp = await open_runpoint([Agent(id="echo", model=ScriptedModel(recorder))])
    first = await (await rp.create_run(CreateRun(agent_id="echo", message="a"))).result()
    session = first.session_id
    second = await (
        await rp.create_run(CreateRun(agent_id="echo", message="b", session_id=session))
    ).result()
    assert recorder.seen[-1] == [*turn("a"), ("user", "b")]

    fork = await (
        await rp.continue_run(ContinueRun(run_id=second.run_id, continue_from=0, input="f"))
    ).result()
    assert recorder.seen[-1] == [*turn("a"), ("user", "f")]  # not b's tail

    fork_of_fork = await (
        await rp.continue_run(ContinueRun(run_id=fork.run_id, input="ff"))
    ).result()
    assert fork_of_fork.forked_from_run_id == fork.run_id
    assert recorder.seen[-1] == [*turn("a"), *turn("f"), ("user", "ff")]

    sibling = await (
        await rp.continue_run(ContinueRun(run_id=second.run_id, continue_from=0, input="g"))
    ).result()
    assert recorder.seen[-1] == [*turn("a"), ("user", "g")]  # not the other branch

    after = await (
        await rp.create_run(CreateRun(agent_id="echo", message="n", session_id=session))
    ).result()
    assert after.previous_run_id == sibling.run_id
    assert recorder.seen[-1] == [*turn("a"), *turn("g"), ("user", "n")]


async def test_history_depth_limits_earlier_runs(open_runpoint: OpenRunpoint) -> None:
    recorder = Recorder()
    agent = Agent(id="echo", model=ScriptedModel(recorder), history_runs=1)
    rp = await open_runpoint([agent])
    session = (
        await (await rp.create_run(CreateRun(agent_id="echo", message="a"))).result()
    ).session_id
    await (
        await rp.create_run(CreateRun(agent_id="echo", message="b", session_id=session))
    ).result()
    await (
        await rp.create_run(CreateRun(agent_id="echo", message="c", session_id=session))
    ).result()
    assert recorder.seen[-1] == [*turn("b"), ("user", "c")]


async def test_a_regenerated_answer_replaces_the_original_in_later_context(
    open_runpoint: OpenRunpoint,
) -> None:
    recorder = Recorder()
    rp = await open_runpoint([Agent(id="echo", model=ScriptedModel(recorder))])
    first = await (await rp.create_run(CreateRun(agent_id="echo", message="a"))).result()
    await (await rp.continue_run(ContinueRun(run_id=first.run_id, regenerate=True))).result()
    assert recorder.seen[-1] == [("user", "a")]
    await (
        await rp.create_run(CreateRun(agent_id="echo", message="b", session_id=first.session_id))
    ).result()
    assert recorder.seen[-1] == [*turn("a"), ("user", "b")]  # once, not twice
