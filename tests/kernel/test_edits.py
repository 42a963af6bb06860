"""Edit and fork: continue from a boundary with edits to what came before it. Each kind of
edit makes a new run whose model sees exactly the edited history; the source is untouched
(its snapshots are the same bytes before and after); the fork's lineage says what was
edited, where and by whom."""

from __future__ import annotations

import msgspec
import pytest

from runpoint.core.errors import InvalidArguments, InvalidRequest
from runpoint.core.tenancy import Principal, acting_as
from runpoint.core.types import Message, RunStatus, ToolCall
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel
from runpoint.runs.edits import ReplaceToolArguments, ReplaceToolResult, ReplaceUserMessage
from runpoint.seams.agent import Agent
from runpoint.seams.model import ModelRequest, ModelResponse
from tests.conftest import OpenRunpoint

POPULATIONS = {"Paris": "2.1M", "Tokyo": "13.9M", "Lagos": "15.3M"}
Seen = tuple[str, str | None, tuple[tuple[str, str, str], ...], str | None]


def get_population(city: str) -> str:
    return POPULATIONS.get(city, "unknown")


class Recorder:
    """A scripted model that looks up every city the last user message names in one
    batch, then answers with the results; it keeps each request's messages."""

    def __init__(self) -> None:
        self.requests: list[list[Message]] = []

    def __call__(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(list(request.messages))
        last = request.messages[-1]
        if last.role == "user":
            cities = [c for c in POPULATIONS if c in (last.content or "")]
            calls = [ToolCall(f"call_{c}", "get_population", {"city": c}) for c in cities]
            return ModelResponse(content="Looking up.", tool_calls=calls)
        found = [m.content or "" for m in request.messages if m.role == "tool"]
        return ModelResponse(content="Found " + ", ".join(found) + ".")


def seen(messages: list[Message]) -> list[Seen]:
    """What a model is shown of each message."""
    return [
        (
            m.role,
            m.content,
            tuple(
                (c.id, c.name, msgspec.json.encode(c.arguments).decode())
                for c in m.tool_calls or ()
            ),
            m.tool_call_id,
        )
        for m in messages
    ]


@pytest.fixture
async def setup(open_runpoint: OpenRunpoint) -> tuple[Runpoint, Recorder, str]:
    """A completed run: user, a turn looking up Paris and Tokyo, their two results, the
    answer (boundaries 0..5; the batch ends at 4)."""
    recorder = Recorder()
    agent = Agent("travel", ScriptedModel(recorder), tools=[get_population])
    rp = await open_runpoint([agent])
    run = await (
        await rp.create_run(CreateRun(agent_id="travel", message="Paris and Tokyo?"))
    ).result()
    assert run.status is RunStatus.COMPLETED and run.message_count == 5
    return rp, recorder, run.run_id


async def snapshots(rp: Runpoint, run_id: str) -> list[bytes]:
    """The run as every boundary shows it, as bytes."""
    run = (await rp.get_run(run_id)).run
    return [
        msgspec.json.encode(await rp.snapshot(run_id, k)) for k in range(run.message_count + 1)
    ] + [msgspec.json.encode(await rp.get_run(run_id))]


async def fork(rp: Runpoint, recorder: Recorder, source: str, **continued: object) -> str:
    """Continue `source` as asked; the new run's id, once it stopped. The recorder keeps
    only the requests of the new run."""
    before = await snapshots(rp, source)
    recorder.requests.clear()
    with acting_as(Principal("default", "ada")):
        run = await (await rp.continue_run(ContinueRun(run_id=source, **continued))).result()  # type: ignore[arg-type]
    assert run.run_id != source and run.status is RunStatus.COMPLETED, run.error
    assert await snapshots(rp, source) == before  # the source is untouched
    return run.run_id


async def test_the_last_user_message_replaced(setup: tuple[Runpoint, Recorder, str]) -> None:
    rp, recorder, source = setup
    original = (await rp.get_run(source)).messages
    edit = ReplaceUserMessage("Lagos?")
    new = await fork(rp, recorder, source, continue_from=1, edits=[edit])
    # the model's first request is the edited history, exactly
    assert seen(recorder.requests[0]) == [("user", "Lagos?", (), None)]
    detail = await rp.get_run(new)
    assert detail.messages[0].replaces == original[0].id
    assert detail.run.content == "Found 15.3M."
    [lineage] = detail.run.edits
    assert (lineage.kind, lineage.message_index, lineage.replaced_message_id) == (
        "user_message",
        0,
        original[0].id,
    )
    assert (lineage.message_id, lineage.user_id, lineage.team_id) == (
        detail.messages[0].id,
        "ada",
        "default",
    )


async def test_a_tool_result_replaced(setup: tuple[Runpoint, Recorder, str]) -> None:
    rp, recorder, source = setup
    original = (await rp.get_run(source)).messages
    new = await fork(
        rp, recorder, source, continue_from=4, edits=[ReplaceToolResult("call_Paris", "99M")]
    )
    expected = seen(original[:4])
    expected[2] = ("tool", "99M", (), "call_Paris")
    assert seen(recorder.requests[0]) == expected
    detail = await rp.get_run(new)
    assert detail.run.content == "Found 99M, 13.9M."
    assert detail.messages[2].replaces == original[2].id
    assert [t.result for t in detail.tools] == ["99M", "13.9M"]
    # only the edited message is the fork's own before its boundary: the rest are the
    # source's rows
    assert [s.run_id for s in detail.run.segments] == [source, new, source, new]


async def test_a_tool_calls_arguments_replaced_and_run_again(
    setup: tuple[Runpoint, Recorder, str],
) -> None:
    rp, recorder, source = setup
    original = (await rp.get_run(source)).messages
    edit = ReplaceToolArguments("call_Tokyo", {"city": "Lagos"})
    new = await fork(rp, recorder, source, continue_from=4, edits=[edit])
    # the call ran again with its new arguments, and the model saw the edited call
    [turn, paris] = original[1:3]
    edited_turn = msgspec.structs.replace(
        turn,
        tool_calls=[
            ToolCall("call_Paris", "get_population", {"city": "Paris"}),
            ToolCall("call_Tokyo", "get_population", {"city": "Lagos"}),
        ],
    )
    rerun = Message(role="tool", content="15.3M", tool_call_id="call_Tokyo")
    assert seen(recorder.requests[0]) == seen([original[0], edited_turn, paris, rerun])
    detail = await rp.get_run(new)
    assert detail.messages[1].replaces == turn.id and detail.messages[1].usage is None
    assert {t.tool_call_id: t.tool_args for t in detail.tools}["call_Tokyo"] == {"city": "Lagos"}
    [lineage] = detail.run.edits
    assert (lineage.kind, lineage.message_index, lineage.tool_call_id) == (
        "tool_arguments",
        1,
        "call_Tokyo",
    )


async def test_edits_before_the_boundary_keep_what_lies_between(
    setup: tuple[Runpoint, Recorder, str],
) -> None:
    """The user message and the batch's last result edited: every other message is the
    source's row, where it was."""
    rp, recorder, source = setup
    original = (await rp.get_run(source)).messages
    edits = [ReplaceUserMessage("Paris and Tokyo, please?"), ReplaceToolResult("call_Tokyo", "14M")]
    new = await fork(rp, recorder, source, continue_from=4, edits=edits)
    expected = seen(original[:4])
    expected[0] = ("user", "Paris and Tokyo, please?", (), None)
    expected[3] = ("tool", "14M", (), "call_Tokyo")
    assert seen(recorder.requests[0]) == expected
    run = (await rp.get_run(new)).run
    assert [s.run_id for s in run.segments] == [new, source, new, new]
    snapshot = await rp.snapshot(new, 5)
    replaced = [m.replaces for m in snapshot.detail.messages]
    assert replaced == [original[0].id, None, None, original[3].id, None]
    assert [(e.kind, e.message_index) for e in snapshot.detail.run.edits] == [
        ("user_message", 0),
        ("tool_result", 3),
    ]


async def test_edits_that_make_no_sense_are_refused_before_anything_starts(
    setup: tuple[Runpoint, Recorder, str],
) -> None:
    rp, _, source = setup
    before = len(await rp.list_runs((await rp.get_run(source)).run.session_id))
    refused: list[tuple[dict[str, object], type[Exception], str]] = [
        (
            {"edits": [ReplaceToolResult("call_nope", "x")]},
            InvalidRequest,
            "no result of tool call call_nope",
        ),
        (
            {"edits": [ReplaceToolArguments("call_Tokyo", {"city": 3})]},
            InvalidArguments,
            "arguments.city",
        ),
        (
            {
                "continue_from": 4,
                "input": "Go",
                "edits": [ReplaceToolArguments("call_Tokyo", {"city": "Lagos"})],
            },
            InvalidRequest,
            "takes no input",
        ),
        (
            {"continue_from": 5, "edits": [ReplaceToolArguments("call_Tokyo", {"city": "Lagos"})]},
            InvalidRequest,
            "last tool batch",
        ),
        (
            {"edits": [ReplaceUserMessage("a"), ReplaceUserMessage("b")]},
            InvalidRequest,
            "two edits",
        ),
        (
            {"continue_from": 0, "edits": [ReplaceUserMessage("a")]},
            InvalidRequest,
            "no user message before message 0",
        ),
        ({"regenerate": True, "edits": [ReplaceUserMessage("a")]}, InvalidRequest, "edits"),
    ]
    for continued, error, says in refused:
        with pytest.raises(error, match=says):
            await rp.continue_run(ContinueRun(run_id=source, **continued))  # type: ignore[arg-type]
    assert len(await rp.list_runs((await rp.get_run(source)).run.session_id)) == before
