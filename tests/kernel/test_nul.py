"""U+0000 (NUL) in text runpoint must keep: a model's output, a tool's arguments and result,
an error. A document holds JSON's escape of it, as bytes on both databases; the run goes
on, and the text reads back as it was. (PostgreSQL's TEXT holds no NUL: see the last test.)"""

from __future__ import annotations

from runpoint.core.types import RunStatus, SessionCheckpointStatus, ToolCall
from runpoint.facade import ContinueRun, CreateRun
from runpoint.plugins.scripted import ScriptedModel, call_id
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import ModelRequest, ModelResponse
from tests.conftest import OpenRunpoint

NUL = "nul:\x00."
# JSON's escape of NUL, as text: a backslash, then u0000 (not a NUL)
ESCAPE = "escape:\\u0000, \\\\u0000."


@tool
def echo(text: str) -> str:
    """Say `text` back (a side effect: its result is recorded before the run goes on)."""
    return f"echo {text}"


def echoing(request: ModelRequest) -> ModelResponse:
    """Echo the user's text with the tool, then answer with what it said and a NUL."""
    last = request.messages[-1]
    if last.role == "user":
        call = ToolCall(call_id(request), "echo", {"text": last.content})
        return ModelResponse(content=NUL, tool_calls=[call])
    return ModelResponse(content=f"{last.content} {NUL}")


async def test_text_with_nul_is_kept_as_it_was(open_runpoint: OpenRunpoint) -> None:
    rp = await open_runpoint([Agent("echoer", ScriptedModel(echoing), tools=[echo])])
    for text in (NUL, ESCAPE, "\x00"):
        run = await (await rp.create_run(CreateRun(agent_id="echoer", message=text))).result()
        assert run.status is RunStatus.COMPLETED, run.error

        detail = await rp.get_run(run.run_id)
        said = f"echo {text}"
        assert detail.run.content == f"{said} {NUL}"
        assert [(m.role, m.content) for m in detail.messages] == [
            ("user", text),
            ("assistant", NUL),
            ("tool", said),
            ("assistant", f"{said} {NUL}"),
        ]
        assert [(t.tool_args, t.result) for t in detail.tools] == [({"text": text}, said)]
        _, timeline = await rp.timeline(run.run_id)
        assert [(c.message_index, c.message_preview) for c in timeline] == [
            (3, said),
            (4, f"{said} {NUL}"),
        ]
        snapshot = await rp.snapshot(run.run_id, 3)
        assert snapshot.detail.messages == detail.messages[:3]
        # the recorded result of the side effect, which a resumed run replays
        call = detail.tools[0].tool_call_id
        recorded = await rp.storage.tool_records(run.run_id, [call])
        assert recorded[call] == detail.messages[2]


async def test_a_continued_run_and_a_session_fork_read_nul_back(
    open_runpoint: OpenRunpoint,
) -> None:
    rp = await open_runpoint([Agent("echoer", ScriptedModel(echoing), tools=[echo])])
    first = await (await rp.create_run(CreateRun(agent_id="echoer", message=NUL))).result()
    forked = await (
        await rp.continue_run(ContinueRun(run_id=first.run_id, continue_from=3))
    ).result()
    assert forked.status is RunStatus.COMPLETED, forked.error
    assert (await rp.get_run(forked.run_id)).messages[:3] == (
        await rp.get_run(first.run_id)
    ).messages[:3]

    checkpoint = await rp.session_checkpoints.create(first.session_id, label=NUL)
    assert (checkpoint.status, checkpoint.label) == (SessionCheckpointStatus.READY, NUL)
    _, (session,) = await rp.session_checkpoints.fork(
        first.session_id, from_checkpoint_id=checkpoint.checkpoint_id, count=1
    )
    (run, _) = await rp.list_runs(session.session_id)
    assert (await rp.get_run(run.run_id)).messages[0].content == NUL


async def test_a_model_error_with_nul_ends_the_run_error_with_its_text(
    open_runpoint: OpenRunpoint,
) -> None:
    def failing(request: ModelRequest) -> ModelResponse:
        raise RuntimeError(NUL)

    rp = await open_runpoint([Agent("failing", ScriptedModel(failing))])
    run = await (await rp.create_run(CreateRun(agent_id="failing", message="go"))).result()
    assert (run.status, run.error) == (RunStatus.ERROR, f"RuntimeError: {NUL}")
    stored = (await rp.get_run(run.run_id)).run
    assert (stored.status, stored.error) == (RunStatus.ERROR, f"RuntimeError: {NUL}")


async def test_a_tool_call_id_with_nul_fails_the_model_turn(open_runpoint: OpenRunpoint) -> None:
    """An id keys the durable record of its call (a TEXT column): as one too long, the
    model's turn fails, and the run ends ERROR as with any model failure."""

    def naming(request: ModelRequest) -> ModelResponse:
        return ModelResponse(tool_calls=[ToolCall("call\x00", "echo", {"text": "Lima"})])

    rp = await open_runpoint([Agent("naming", ScriptedModel(naming), tools=[echo])])
    run = await (await rp.create_run(CreateRun(agent_id="naming", message="go"))).result()
    assert run.status is RunStatus.ERROR
    assert run.error == "ValueError: model scripted named a tool call whose id has a U+0000 (NUL)"
    detail = await rp.get_run(run.run_id)
    assert ([m.role for m in detail.messages], detail.tools) == (["user"], [])
