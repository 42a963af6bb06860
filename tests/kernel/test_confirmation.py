"""Human in the loop: a tool that needs confirmation pauses the run until continue."""

from __future__ import annotations

import re

import pytest

from runpoint.core.errors import InvalidArguments, InvalidRequest
from runpoint.core.types import Approve, Reject, RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import agents
from tests.conftest import OpenRunpoint

pytestmark = pytest.mark.memory  # storage is not the subject here


@pytest.fixture
async def rp(open_runpoint: OpenRunpoint) -> Runpoint:
    return await open_runpoint(agents)


async def paused(rp: Runpoint) -> tuple[str, str]:
    run = await (
        await rp.create_run(CreateRun(agent_id="booking-agent", message="Book Paris"))
    ).result()
    assert run.status is RunStatus.PAUSED
    detail = await rp.get_run(run.run_id)
    [pending] = [t for t in detail.tools if t.result is None]
    assert pending.requires_confirmation and pending.tool_args == {"city": "Paris"}
    return run.run_id, pending.tool_call_id


async def test_confirmed_tool_runs_in_the_same_run(rp: Runpoint) -> None:
    run_id, call_id = await paused(rp)
    run = await (await rp.continue_run(ContinueRun(run_id=run_id, tools={call_id: True}))).result()
    assert run.run_id == run_id and run.status is RunStatus.COMPLETED
    detail = await rp.get_run(run_id)
    [tool] = detail.tools
    assert (tool.result, tool.tool_call_error) == ("Booked a trip to Paris.", False)
    assert run.content == "Here is what I found. Paris: Booked a trip to Paris.."


async def test_decisions_sent_with_a_background_continue_reach_the_run(rp: Runpoint) -> None:
    run_id, call_id = await paused(rp)
    # written with the run; on PostgreSQL the run queue's job finds it there
    handle = await rp.continue_run(
        ContinueRun(run_id=run_id, tools={call_id: True}, background=True)
    )
    assert handle.run.status is RunStatus.PENDING
    run = await handle.result()
    assert run.run_id == run_id and run.status is RunStatus.COMPLETED
    [tool] = (await rp.get_run(run_id)).tools
    assert (tool.result, tool.tool_call_error) == ("Booked a trip to Paris.", False)


async def test_rejected_tool_is_an_error_result_not_a_call(rp: Runpoint) -> None:
    run_id, call_id = await paused(rp)
    run = await (await rp.continue_run(ContinueRun(run_id=run_id, tools={call_id: False}))).result()
    assert run.status is RunStatus.COMPLETED
    [tool] = (await rp.get_run(run_id)).tools
    assert tool.tool_call_error and tool.result == "The user rejected this tool call."


async def test_resume_without_a_decision_stays_paused(rp: Runpoint) -> None:
    run_id, _ = await paused(rp)
    run = await (await rp.continue_run(ContinueRun(run_id=run_id))).result()
    assert run.status is RunStatus.PAUSED


async def test_bad_decisions_are_rejected(rp: Runpoint) -> None:
    run_id, call_id = await paused(rp)
    with pytest.raises(InvalidRequest, match="no paused tool call"):
        await rp.continue_run(ContinueRun(run_id=run_id, tools={"call_nope": True}))
    with pytest.raises(InvalidRequest, match="send `tools`"):
        await rp.continue_run(ContinueRun(run_id=run_id, input="hello?"))
    with pytest.raises(InvalidRequest, match="paused run from end"):
        await rp.continue_run(ContinueRun(run_id=run_id, continue_from=1, tools={call_id: True}))


async def test_approved_with_edited_arguments_runs_the_edit_and_keeps_the_proposal(
    rp: Runpoint,
) -> None:
    run_id, call_id = await paused(rp)
    edit = Approve({"city": "Lyon"})
    run = await (await rp.continue_run(ContinueRun(run_id=run_id, tools={call_id: edit}))).result()
    assert run.status is RunStatus.COMPLETED
    detail = await rp.get_run(run_id)
    [tool] = detail.tools
    assert (tool.tool_args, tool.proposed_args) == ({"city": "Lyon"}, {"city": "Paris"})
    assert (tool.result, tool.ruling) == ("Booked a trip to Lyon.", "edited")
    # the transcript keeps what the model proposed, and its result says what ran
    [turn] = [m for m in detail.messages if m.tool_calls]
    [result] = [m for m in detail.messages if m.role == "tool"]
    assert turn.tool_calls is not None and turn.tool_calls[0].arguments == {"city": "Paris"}
    assert (result.tool_args, result.ruling) == ({"city": "Lyon"}, "edited")


async def test_an_edit_that_changes_nothing_is_a_plain_approval(rp: Runpoint) -> None:
    run_id, call_id = await paused(rp)
    await (
        await rp.continue_run(
            ContinueRun(run_id=run_id, tools={call_id: Approve({"city": "Paris"})})
        )
    ).result()
    [tool] = (await rp.get_run(run_id)).tools
    assert (tool.ruling, tool.proposed_args, tool.result) == (
        "approved",
        None,
        "Booked a trip to Paris.",
    )


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"city": 7}, "arguments.city: Expected `str`, got `int`"),
        ({}, "arguments.city is required"),
        ({"city": "Lyon", "nights": 2}, "arguments.nights is not a parameter of the tool"),
    ],
)
async def test_edited_arguments_the_schema_refuses_are_refused_naming_the_field(
    rp: Runpoint, arguments: dict[str, object], named: str
) -> None:
    run_id, call_id = await paused(rp)
    with pytest.raises(InvalidArguments, match=re.escape(named)):
        await rp.continue_run(ContinueRun(run_id=run_id, tools={call_id: Approve(arguments)}))
    # nothing was accepted: the run still waits for a decision
    run = (await rp.get_run(run_id)).run
    assert (run.status, run.decisions) == (RunStatus.PAUSED, {})


async def test_a_rejection_tells_the_model_why(rp: Runpoint) -> None:
    run_id, call_id = await paused(rp)
    reason = Reject("Too expensive this month.")
    run = await (
        await rp.continue_run(ContinueRun(run_id=run_id, tools={call_id: reason}))
    ).result()
    [tool] = (await rp.get_run(run_id)).tools
    assert tool.tool_call_error and tool.ruling == "rejected"
    assert (
        tool.result
        == "The user rejected this tool call. The reason given: Too expensive this month."
    )
    assert run.content is not None and "Too expensive this month." in run.content


async def test_a_person_may_give_the_result_instead_of_running_the_call(rp: Runpoint) -> None:
    run_id, call_id = await paused(rp)
    await (
        await rp.continue_run(ContinueRun(run_id=run_id, tools={call_id: "Booked by phone."}))
    ).result()
    [tool] = (await rp.get_run(run_id)).tools
    assert (tool.result, tool.ruling, tool.tool_call_error) == (
        "Booked by phone.",
        "answered",
        False,
    )
