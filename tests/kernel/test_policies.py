"""What a checkpoint policy sees: counts over the run's whole transcript (a fork and a
resumed run meet each boundary with the counts their source had there), the agent, the
batch's tools and effects, and the agent's options, checked at start-up."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from runpoint import hookimpl
from runpoint.core.errors import ConfigurationError
from runpoint.core.types import Decision, RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import get_population
from runpoint.seams.agent import Agent, Tool, tool
from runpoint.seams.host import PluginHost
from runpoint.seams.policy import BatchCall, Boundary, CheckpointPolicyFactory
from tests.conftest import OpenRunpoint

pytestmark = pytest.mark.memory  # storage is not the subject here

CITIES = "Paris, Tokyo, Lagos and Kyoto"  # four tool batches (ending at 3, 5, 7, 9), then 10


def every_n_turns(n: int, population: Tool = get_population) -> Agent:
    return Agent(
        id="a",
        model="scripted:demo",
        tools=[population],
        checkpoint="every-n-turns",
        checkpoint_options={"n": n},
    )


async def checkpoints(rp: Runpoint, run_id: str) -> list[int]:
    _, timeline = await rp.timeline(run_id)
    return [c.message_index for c in timeline]


async def test_a_fork_checkpoints_where_its_source_did(open_runpoint: OpenRunpoint) -> None:
    rp = await open_runpoint([every_n_turns(3)])
    source = await (await rp.create_run(CreateRun(agent_id="a", message=CITIES))).result()
    assert await checkpoints(rp, source.run_id) == [7, 10]  # the third turn, and the end
    fork = await (
        await rp.continue_run(ContinueRun(run_id=source.run_id, continue_from=3, fork=True))
    ).result()
    assert fork.status is RunStatus.COMPLETED, fork.error
    # it inherits one turn: its own second turn is the lineage's third
    assert await checkpoints(rp, fork.run_id) == [7, 10]


async def test_a_resumed_run_counts_on(open_runpoint: OpenRunpoint) -> None:
    confirmed = tool(requires_confirmation=True, effect="read")(get_population.function)
    rp = await open_runpoint([every_n_turns(2, confirmed)])
    run = await (await rp.create_run(CreateRun(agent_id="a", message=CITIES))).result()
    executions = 1
    while run.status is RunStatus.PAUSED:  # each batch waits for a person: one execution each
        detail = await rp.get_run(run.run_id)
        decisions: dict[str, Decision] = {
            t.tool_call_id: True for t in detail.tools if t.result is None
        }
        run = await (
            await rp.continue_run(ContinueRun(run_id=run.run_id, tools=decisions))
        ).result()
        executions += 1
    assert (run.status, executions) == (RunStatus.COMPLETED, 5)
    # as in one execution: the second and fourth turns, and the end
    assert await checkpoints(rp, run.run_id) == [5, 9, 10]


async def test_a_policy_sees_its_options_the_agent_and_the_batch(database: str) -> None:
    made: list[Recording] = []

    class Recording:
        def __init__(self, **options: object) -> None:
            self.options = options
            self.boundaries: list[Boundary] = []
            made.append(self)

        def is_checkpoint(self, boundary: Boundary) -> bool:
            self.boundaries.append(boundary)
            return False

    class Plugin:
        @hookimpl
        def runpoint_checkpoint_policies(self) -> Mapping[str, CheckpointPolicyFactory]:
            return {"recording": Recording}

    agent = Agent(
        id="a",
        model="scripted:demo",
        tools=[get_population],
        checkpoint="recording",
        checkpoint_options={"label": "audit"},
    )
    async with Runpoint([agent], database=database, host=PluginHost([Plugin()])) as rp:
        await (await rp.create_run(CreateRun(agent_id="a", message="Paris and Tokyo"))).result()
    *_, policy = made  # made at start-up, then for the execution
    assert policy.options == {"label": "audit"}
    batch = (BatchCall("get_population", "read"),)
    assert policy.boundaries == [
        Boundary("tool_batch", 3, model_turns=1, tool_batches=1, agent=agent, batch=batch),
        Boundary("tool_batch", 5, model_turns=2, tool_batches=2, agent=agent, batch=batch),
        Boundary("end", 6, model_turns=3, tool_batches=2, agent=agent),
    ]


@pytest.mark.parametrize(
    ("policy", "options", "refusal"),
    [
        ("every-n-turns", {"n": 0}, "n must be a whole number of at least 1, not 0"),
        ("every-n-turns", {"n": "3"}, "n must be a whole number of at least 1, not '3'"),
        ("every-n-turns", {"m": 3}, "unexpected keyword argument 'm'"),
        ("tool-batch", {"n": 3}, "takes no arguments"),
    ],
)
def test_bad_options_fail_at_start_up(
    policy: str, options: dict[str, object], refusal: str
) -> None:
    agent = Agent(id="a", model="scripted:demo", checkpoint=policy, checkpoint_options=options)
    with pytest.raises(ConfigurationError) as refused:
        Runpoint([agent])
    message = str(refused.value)
    assert message.startswith(f"agent 'a': checkpoint policy {policy!r} refused the options ")
    assert refusal in message
