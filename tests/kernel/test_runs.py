"""Runs, timelines, snapshots and continue: the semantics docs/architecture.md pins down."""

from __future__ import annotations

import asyncio

import pytest

from runpoint.core.errors import InvalidBoundary, InvalidRequest, NotFound
from runpoint.core.types import RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import agents as demo_agents
from tests.conftest import OpenRunpoint

QUESTION = "Compare the populations of Paris, Tokyo, and Lagos in one sentence."


@pytest.fixture
async def rp(open_runpoint: OpenRunpoint) -> Runpoint:
    return await open_runpoint(demo_agents)


async def completed(rp: Runpoint, message: str = QUESTION) -> str:
    run = await (await rp.create_run(CreateRun(agent_id="travel-agent", message=message))).result()
    assert run.status is RunStatus.COMPLETED, run.error
    return run.run_id


async def test_timeline_has_one_checkpoint_per_tool_batch_and_the_end(rp: Runpoint) -> None:
    run_id = await completed(rp)
    run, timeline = await rp.timeline(run_id)
    # user, then (assistant call, tool result) x 3 cities, then the answer
    assert run.message_count == 8
    assert [(c.message_index, c.reason, c.status) for c in timeline] == [
        (3, "checkpoint", "RUNNING"),
        (5, "checkpoint", "RUNNING"),
        (7, "checkpoint", "RUNNING"),
        (8, "end", "COMPLETED"),
    ]
    assert [c.message_role for c in timeline] == ["tool", "tool", "tool", "assistant"]
    assert [c.message_preview for c in timeline[:3]] == ["2.1M", "13.9M", "15.3M"]
    assert {c.policy for c in timeline} == {"tool-batch"}
    assert run.last_checkpoint_at_message_index == 8


async def test_an_announced_checkpoint_stays_when_the_run_ends_at_its_index(
    open_runpoint: OpenRunpoint,
) -> None:
    from runpoint.plugins.demo import get_population
    from runpoint.seams.agent import Agent

    short = Agent(id="short", model="scripted:demo", tools=[get_population], max_turns=1)
    rp = await open_runpoint([short])
    handle = await rp.create_run(CreateRun(agent_id="short", message="Paris"), stream=True)
    announced = [
        e.data["checkpoint"] async for e in handle.events() if e.event == "CheckpointCreated"
    ]
    run = await handle.result()
    assert run.status is RunStatus.ERROR  # out of turns right after its tool batch, at index 3
    _, timeline = await rp.timeline(run.run_id)
    assert [(c["checkpoint_id"], c["message_index"]) for c in announced] == [
        (c.checkpoint_id, c.message_index) for c in timeline
    ]
    assert [(c.message_index, c.reason) for c in timeline] == [(3, "checkpoint")]
    assert run.last_checkpoint_at_message_index == 3


async def test_runs_policy_marks_only_the_end(open_runpoint: OpenRunpoint) -> None:
    from runpoint.plugins.demo import get_population
    from runpoint.seams.agent import Agent

    agent = Agent(id="a", model="scripted:demo", tools=[get_population], checkpoint="runs")
    rp = await open_runpoint([agent])
    run = await (await rp.create_run(CreateRun(agent_id="a", message="Paris and Tokyo"))).result()
    _, timeline = await rp.timeline(run.run_id)
    assert [(c.message_index, c.reason) for c in timeline] == [(run.message_count, "end")]


async def test_snapshot_is_the_run_as_it_was(rp: Runpoint) -> None:
    run_id = await completed(rp)
    snapshot = await rp.snapshot(run_id, 5)
    detail = snapshot.detail
    assert snapshot.message_index == 5 and snapshot.checkpoint is not None
    assert snapshot.checkpoint.message_index == 5
    assert detail.run.status is RunStatus.RUNNING  # not the final COMPLETED
    assert detail.run.content == "Looking up Tokyo."  # not the final answer
    assert detail.run.message_count == 5 and len(detail.messages) == 5
    assert [t.tool_args["city"] for t in detail.tools] == ["Paris", "Tokyo"]
    assert detail.run.usage.output_tokens < (await rp.get_run(run_id)).run.usage.output_tokens
    assert detail.run.last_checkpoint_at_message_index == 5
    # the stored run is untouched
    assert (await rp.get_run(run_id)).run.status is RunStatus.COMPLETED


async def test_snapshot_snaps_down_to_a_safe_boundary(rp: Runpoint) -> None:
    run_id = await completed(rp)
    # index 4 would keep Tokyo's tool call but cut its result
    snapshot = await rp.snapshot(run_id, 4)
    assert (snapshot.requested_index, snapshot.message_index) == (4, 3)
    assert snapshot.detail.messages[-1].role == "tool"
    assert snapshot.checkpoint is not None and snapshot.checkpoint.message_index == 3
    # a boundary that is no checkpoint has none
    first = await rp.snapshot(run_id, 1)
    assert first.message_index == 1 and first.checkpoint is None
    assert [m.role for m in first.detail.messages] == ["user"]
    end = await rp.snapshot(run_id, 8)
    assert end.detail.run.status is RunStatus.COMPLETED
    assert end.detail.run.content == (await rp.get_run(run_id)).run.content


@pytest.mark.parametrize("index", [-1, 9, 10_000])
async def test_snapshot_out_of_range_is_rejected(rp: Runpoint, index: int) -> None:
    run_id = await completed(rp)
    with pytest.raises(InvalidBoundary, match=r"0\.\.8"):
        await rp.snapshot(run_id, index)


async def test_continue_from_a_mid_boundary_forks_and_keeps_the_source(rp: Runpoint) -> None:
    run_id = await completed(rp)
    before = await rp.get_run(run_id)
    handle = await rp.continue_run(
        ContinueRun(run_id=run_id, continue_from=3, input="Just Kyoto, please.")
    )
    fork = await handle.result()
    assert fork.run_id != run_id
    assert (fork.forked_from_run_id, fork.forked_from_message_index) == (run_id, 3)
    assert fork.status is RunStatus.COMPLETED
    assert fork.content == "Here is what I found. Kyoto: 1.5M."
    messages = (await rp.get_run(fork.run_id)).messages
    assert [m.id for m in messages[:3]] == [m.id for m in before.messages[:3]]
    assert messages[3].content == "Just Kyoto, please."
    after = await rp.get_run(run_id)
    assert after == before  # the source is unchanged
    # the fork's timeline: the inherited checkpoint below the fork point, then its own
    _, timeline = await rp.timeline(fork.run_id)
    assert [(c.message_index, c.run_id) for c in timeline] == [
        (3, run_id),
        (6, fork.run_id),
        (7, fork.run_id),
    ]


@pytest.mark.parametrize(
    ("continue_from", "error"),
    [
        (9, "outside this run's boundaries 0..8"),
        (-1, "outside this run's boundaries 0..8"),
        (42, "outside this run's boundaries 0..8"),
    ],
)
async def test_continue_from_out_of_range_is_rejected(
    rp: Runpoint, continue_from: int, error: str
) -> None:
    run_id = await completed(rp)
    with pytest.raises(InvalidBoundary, match=error):
        await rp.continue_run(
            ContinueRun(run_id=run_id, continue_from=continue_from, input="again")
        )
    assert len(await rp.list_runs((await rp.get_run(run_id)).run.session_id)) == 1


async def test_continue_from_end_of_a_completed_run(rp: Runpoint) -> None:
    run_id = await completed(rp)
    again = await (
        await rp.continue_run(ContinueRun(run_id=run_id))
    ).result()  # another turn, as with AgentOS
    assert again.run_id != run_id and again.forked_from_message_index == 8
    assert again.status == "COMPLETED"
    run = await (await rp.continue_run(ContinueRun(run_id=run_id, input="And Lima?"))).result()
    assert run.run_id != run_id and run.forked_from_message_index == 8
    assert run.content == "Here is what I found. Lima: unknown."


async def test_continue_last_user_and_regenerate(rp: Runpoint) -> None:
    run_id = await completed(rp)
    from_user = await (
        await rp.continue_run(ContinueRun(run_id=run_id, continue_from="last_user"))
    ).result()
    assert from_user.forked_from_message_index == 1
    assert from_user.content == (await rp.get_run(run_id)).run.content

    regenerated = await (
        await rp.continue_run(ContinueRun(run_id=run_id, regenerate=True))
    ).result()
    assert regenerated.regenerated_from == run_id
    assert regenerated.forked_from_message_index == 7  # the tool work is kept
    assert (await rp.get_run(run_id)).run.status is RunStatus.REGENERATED

    kept = await completed(rp, "Paris")
    again = await (
        await rp.continue_run(ContinueRun(run_id=kept, regenerate=True, replace_original=False))
    ).result()
    assert again.regenerated_from == kept
    assert (await rp.get_run(kept)).run.status is RunStatus.COMPLETED


@pytest.mark.parametrize(
    "kwargs",
    [
        {"regenerate": True, "input": "x"},
        {"regenerate": True, "continue_from": 3},
        {"regenerate": True, "fork": True},
        {"replace_original": True},
        {"input": "   "},
        {"tools": {"call_1_0": True}},
    ],
)
async def test_continue_rejects_contradictory_requests(
    rp: Runpoint, kwargs: dict[str, object]
) -> None:
    run_id = await completed(rp)
    with pytest.raises(InvalidRequest):
        await rp.continue_run(ContinueRun(run_id=run_id, **kwargs))  # type: ignore[arg-type]


async def test_unknown_things_are_not_found(rp: Runpoint) -> None:
    run_id = await completed(rp)
    with pytest.raises(NotFound, match="agent"):
        await rp.create_run(CreateRun(agent_id="nobody", message="hi"))
    with pytest.raises(NotFound, match="run"):
        await rp.get_run("no-such-run")
    with pytest.raises(NotFound, match="run"):
        await rp.timeline(run_id, session_id="another-session")
    with pytest.raises(NotFound, match="run"):
        await rp.snapshot(run_id, 1, agent_id="checkpoint-agent")
    with pytest.raises(NotFound, match="run"):
        await rp.continue_run(ContinueRun(run_id="no-such-run", input="x"))
    with pytest.raises(NotFound, match="session"):
        await rp.list_runs("no-such-session")


async def test_cancel_answers_truthfully(rp: Runpoint) -> None:
    run_id = await completed(rp)
    # idempotent: an ended run stays as it was, and the answer says so
    assert (await rp.cancel(run_id)).status == "COMPLETED"
    assert (await rp.get_run(run_id)).run.status == "COMPLETED"
    with pytest.raises(NotFound):
        await rp.cancel("no-such-run")


async def test_cancel_stops_a_run_at_its_next_boundary(open_runpoint: OpenRunpoint) -> None:
    from runpoint.seams.agent import Agent, tool

    cancelled = asyncio.Event()

    @tool(effect="read")
    async def get_population(city: str) -> str:
        """The population, once the test has cancelled the run (a stream's events come
        after they are stored: a run that does not wait would be over by then)."""
        await cancelled.wait()
        return "2.1M"

    rp = await open_runpoint([Agent(id="gated", model="scripted:demo", tools=[get_population])])
    handle = await rp.create_run(CreateRun(agent_id="gated", message=QUESTION), stream=True)
    async for event in handle.events():
        if event.event == "ToolCallStarted" and not cancelled.is_set():
            await rp.cancel(handle.run.run_id)
            cancelled.set()
    run = await handle.result()
    assert run.status is RunStatus.CANCELLED
    _, timeline = await rp.timeline(run.run_id)
    # the batch in flight when cancel came finished; nothing after it ran. It ended where
    # its last checkpoint is: that one stays (its id was announced), the run says the end
    assert [(c.message_index, c.reason, c.status) for c in timeline] == [
        (3, "checkpoint", "RUNNING"),
    ]
    resumed = await (
        await rp.continue_run(ContinueRun(run_id=run.run_id, input="Only Lagos"))
    ).result()
    assert resumed.forked_from_run_id == run.run_id and resumed.status is RunStatus.COMPLETED


async def test_streamed_events_in_order(rp: Runpoint) -> None:
    handle = await rp.create_run(CreateRun(agent_id="travel-agent", message="Paris"), stream=True)
    names = [event.event async for event in handle.events()]
    assert names[0] == "RunStarted"
    assert names[-3:] == ["RunContentCompleted", "CheckpointCreated", "RunCompleted"]
    assert names.count("ToolCallStarted") == names.count("ToolCallCompleted") == 1
    assert names.index("ToolCallCompleted") < names.index("CheckpointCreated")
    fork = await rp.continue_run(
        ContinueRun(run_id=handle.run.run_id, continue_from=1), stream=True
    )
    events = [e.event async for e in fork.events()]
    assert events[0] == "RunContinued"


async def test_a_second_run_while_one_is_in_flight_is_a_conflict(
    open_runpoint: OpenRunpoint,
) -> None:
    from runpoint.core.errors import Conflict
    from runpoint.seams.agent import Agent, tool

    gate = asyncio.Event()

    @tool(effect="read")
    async def get_population(city: str) -> str:
        """The population, once the test opens the gate: the run is in flight until then
        (an ungated run may be over before the second request)."""
        await gate.wait()
        return "2.1M"

    rp = await open_runpoint([Agent(id="gated", model="scripted:demo", tools=[get_population])])
    handle = await rp.create_run(CreateRun(agent_id="gated", message=QUESTION))
    with pytest.raises(Conflict, match="in flight"):
        await rp.create_run(
            CreateRun(agent_id="gated", message="again", session_id=handle.run.session_id)
        )
    gate.set()
    assert (await handle.result()).status is RunStatus.COMPLETED
    again = await (
        await rp.create_run(
            CreateRun(agent_id="gated", message="again", session_id=handle.run.session_id)
        )
    ).result()
    assert again.status is RunStatus.COMPLETED
