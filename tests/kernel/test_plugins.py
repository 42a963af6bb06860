"""The plugin host: entry points, the disable switch, validation, third-party policies,
observers that fail, names two plugins claim, and `runpoint plugins`."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import pluggy
import pytest

from runpoint import hookimpl
from runpoint.adapters.cli import main
from runpoint.core.errors import ConfigurationError
from runpoint.core.types import Checkpoint, Message, RunStatus, Timing, ToolCall
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.plugins.demo import get_population
from runpoint.plugins.scripted import ScriptedModel
from runpoint.seams.agent import Agent
from runpoint.seams.host import MODELS_KEPT, PluginHost
from runpoint.seams.model import ModelRequest, ModelResponse
from tests.conftest import OpenRunpoint

pytestmark = pytest.mark.memory  # storage is not the subject here


def test_built_ins_and_third_party_plugins_load_from_entry_points() -> None:
    names = {name for name, _ in PluginHost().manager.list_name_plugin()}
    assert {"policies", "scripted", "sql", "every_n_turns"} <= names


def test_plugins_can_be_disabled_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOINT_DISABLE_PLUGINS", "scripted, every_n_turns")
    host = PluginHost()
    with pytest.raises(ConfigurationError, match="no model provider 'scripted'"):
        host.model("scripted:demo")
    with pytest.raises(ConfigurationError, match="no checkpoint policy named 'every-n-turns'"):
        host.policy(Agent(id="a", model="scripted:demo", checkpoint="every-n-turns"))
    assert host.policy(Agent(id="a", model="scripted:demo")) is not None


def test_a_model_string_makes_one_model_and_the_models_kept_are_bounded() -> None:
    host = PluginHost()
    first = host.model("scripted:demo")
    assert host.model("scripted:demo") is first  # its SDK client, if any, serves every run

    for i in range(MODELS_KEPT):  # model strings a client may name in continues
        host.model(f"openai:model-{i}")

    assert host.model("scripted:demo") is not first  # let go, made again


async def test_the_scripted_model_waits_its_latency_before_each_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A vendor's time to first token, as an option of the offline model: each turn waits
    `latency` seconds before its first delta (0 waits nothing)."""
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("runpoint.plugins.scripted.asyncio.sleep", sleep)
    request = ModelRequest(None, [Message(role="user", content="hi")], [])
    slow = ScriptedModel([ModelResponse(content="one")], latency=0.25)
    chunks = [chunk async for chunk in slow.stream(request)]
    assert waits[0] == 0.25 and 0.25 not in waits[1:]
    assert isinstance(chunks[-1], ModelResponse) and chunks[-1].content == "one"
    waits.clear()
    [_ async for _ in ScriptedModel([ModelResponse(content="one")]).stream(request)]
    assert 0.25 not in waits and all(w == 0 for w in waits)


def test_a_hook_that_matches_no_spec_fails_loudly() -> None:
    class Misspelt:
        @hookimpl
        def runpoint_checkpoint_policys(self) -> dict[str, object]:
            return {}

    with pytest.raises(pluggy.PluginValidationError, match="unknown hook"):
        PluginHost(extra_plugins=[Misspelt()])


def test_unknown_names_fail_at_start_up() -> None:
    with pytest.raises(ConfigurationError, match="no checkpoint policy named 'nightly'"):
        Runpoint([Agent(id="a", model="scripted:demo", checkpoint="nightly")])
    with pytest.raises(ConfigurationError, match="no model provider 'nope'"):
        Runpoint([Agent(id="a", model="nope:model")])
    with pytest.raises(ConfigurationError, match="provider:model"):
        Runpoint([Agent(id="a", model="gpt")])


async def test_a_third_party_policy_is_chosen_by_name(open_runpoint: OpenRunpoint) -> None:
    agent = Agent(
        id="a",
        model="scripted:demo",
        tools=[get_population],
        checkpoint="every-n-turns",
        checkpoint_options={"n": 2},
    )
    rp = await open_runpoint([agent])
    run = await (
        await rp.create_run(CreateRun(agent_id="a", message="Paris, Tokyo, Lagos and Kyoto"))
    ).result()
    _, timeline = await rp.timeline(run.run_id)
    # four tool batches (turns 1-4), then the answer: turns 2 and 4, and the end
    assert [(c.message_index, c.reason, c.policy) for c in timeline] == [
        (5, "checkpoint", "every-n-turns"),
        (9, "checkpoint", "every-n-turns"),
        (10, "end", "every-n-turns"),
    ]


async def test_run_hooks_are_called_in_order(database: str) -> None:
    calls: list[str] = []

    class Watcher:
        @hookimpl
        def runpoint_run_started(self, run: object) -> None:
            calls.append("started")

        @hookimpl
        def runpoint_message_appended(self, message: object, index: int) -> None:
            calls.append(f"message {index}")

        @hookimpl
        def runpoint_model_turn_done(
            self, model: str, message: Message | None, error: Exception | None, timing: Timing
        ) -> None:
            assert message is not None and error is None and timing.seconds >= 0
            calls.append(f"{model} turn: {'tools' if message.tool_calls else 'answer'}")

        @hookimpl
        def runpoint_tool_call_done(self, message: Message, timing: Timing) -> None:
            assert timing.started_at <= time.time() and timing.seconds >= 0
            calls.append(f"{message.tool_name} done: {message.content}")

        @hookimpl
        def runpoint_tool_batch_done(self, executions: list[object]) -> None:
            calls.append(f"batch of {len(executions)}")

        @hookimpl
        def runpoint_checkpoint_written(self, checkpoint: object, timing: Timing) -> None:
            assert timing.seconds >= 0
            calls.append("checkpoint")

        @hookimpl
        def runpoint_run_finished(self, run: object) -> None:
            calls.append("finished")

    agent = Agent(id="a", model="scripted:demo", tools=[get_population])
    async with Runpoint([agent], database=database, host=PluginHost([Watcher()])) as rp:
        run = await (await rp.create_run(CreateRun(agent_id="a", message="Paris"))).result()
        first = list(calls)
        calls.clear()
        await (
            await rp.continue_run(ContinueRun(run_id=run.run_id, input="Tokyo"))
        ).result()  # a new run, at 4
    assert first == [
        "started",
        "message 0",  # the input, written with the run
        "message 1",
        "scripted:demo turn: tools",
        "get_population done: 2.1M",  # as the call returns, before the batch is whole
        "message 2",
        "batch of 1",
        "checkpoint",
        "message 3",
        "scripted:demo turn: answer",
        "checkpoint",
        "finished",
    ]
    assert calls == [
        "started",
        "message 4",
        "message 5",
        "scripted:demo turn: tools",
        "get_population done: 13.9M",
        "message 6",
        "batch of 1",
        "checkpoint",
        "message 7",
        "scripted:demo turn: answer",
        "checkpoint",
        "finished",
    ]


async def test_a_model_turn_that_fails_is_told_with_its_error(database: str) -> None:
    told: list[tuple[Message | None, Exception | None]] = []

    class Watcher:
        @hookimpl
        def runpoint_model_turn_done(
            self, message: Message | None, error: Exception | None
        ) -> None:
            told.append((message, error))

    def failing(request: ModelRequest) -> ModelResponse:
        raise ConnectionError("the vendor is down")

    agent = Agent(id="a", model=ScriptedModel(failing))
    async with Runpoint([agent], database=database, host=PluginHost([Watcher()])) as rp:
        run = await (await rp.create_run(CreateRun(agent_id="a", message="Paris"))).result()
    assert run.status is RunStatus.ERROR
    [(message, error)] = told
    assert message is None and isinstance(error, ConnectionError)


async def test_a_tool_call_that_does_not_run_is_not_a_tool_call(database: str) -> None:
    """A refused call (an unknown tool, one a person rejected) ran nothing: no hook says it
    did."""
    done: list[str] = []

    class Watcher:
        @hookimpl
        def runpoint_tool_call_done(self, message: Message) -> None:
            done.append(message.tool_name or "")

    def unknown(request: ModelRequest) -> ModelResponse:
        if request.messages[-1].role == "tool":
            return ModelResponse(content="done")
        return ModelResponse(tool_calls=[ToolCall(id="c1", name="no_such_tool")])

    agent = Agent(id="a", model=ScriptedModel(unknown), tools=[get_population])
    async with Runpoint([agent], database=database, host=PluginHost([Watcher()])) as rp:
        run = await (await rp.create_run(CreateRun(agent_id="a", message="Paris"))).result()
    assert run.status is RunStatus.COMPLETED and done == []


async def test_an_observer_that_raises_is_logged_and_the_run_goes_on(
    database: str, caplog: pytest.LogCaptureFixture
) -> None:
    written: list[int] = []

    class Broken:
        @hookimpl
        def runpoint_checkpoint_written(self) -> None:
            raise RuntimeError("the metrics endpoint is down\nand says so on two lines")

    class Counting:
        @hookimpl
        def runpoint_checkpoint_written(self, checkpoint: Checkpoint) -> None:
            written.append(checkpoint.message_index)

    agent = Agent(id="a", model="scripted:demo", tools=[get_population])
    host = PluginHost([Broken(), Counting()])
    async with Runpoint([agent], database=database, host=host) as rp:
        with caplog.at_level(logging.WARNING, logger="runpoint.host"):
            run = await (await rp.create_run(CreateRun(agent_id="a", message="Paris"))).result()
        _, timeline = await rp.timeline(run.run_id)
    assert run.status is RunStatus.COMPLETED, run.error
    assert written == [c.message_index for c in timeline] == [3, 4]
    # one line per failure, naming the plugin and the hook; no traceback
    host_records = [r for r in caplog.records if r.name == "runpoint.host"]
    assert [(r.getMessage(), r.exc_info) for r in host_records] == 2 * [
        (
            "plugin Broken failed in runpoint_checkpoint_written: "
            "RuntimeError('the metrics endpoint is down\\nand says so on two lines')",
            None,
        )
    ]


@pytest.mark.parametrize(
    ("hook", "name", "owner", "what"),
    [
        ("runpoint_checkpoint_policies", "tool-batch", "policies", "checkpoint policy"),
        ("runpoint_model_providers", "scripted", "scripted", "model provider"),
        ("runpoint_storage_backends", "sqlite", "sql", "storage"),
    ],
)
def test_a_name_two_plugins_register_fails_at_start_up(
    hook: str, name: str, owner: str, what: str
) -> None:
    class Copycat:
        pass

    setattr(Copycat, hook, hookimpl(lambda self: {name: object()}))
    with pytest.raises(ConfigurationError) as refused:
        PluginHost([Copycat()])
    both = f"plugins {owner!r} and 'Copycat' both register the {what} {name!r}"
    assert str(refused.value) == both


def test_hook_wrappers_are_refused() -> None:
    class Wrapping:
        @hookimpl(wrapper=True)
        def runpoint_run_started(self) -> object:
            return (yield)

    with pytest.raises(ConfigurationError, match=r"no wrappers: Wrapping\.runpoint_run_started"):
        PluginHost([Wrapping()])


def test_runpoint_plugins_lists_the_plugins_their_hooks_and_names(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNPOINT_DISABLE_PLUGINS", "openai,anthropic")
    assert main(["plugins"]) == 0
    listed = capsys.readouterr().out
    assert listed.startswith("approval_webhook  (runpoint-approval-webhook 0.1.0)\n")
    assert "\nevery_n_turns  (runpoint-every-n-turns 0.1.0)\n" in listed
    assert "\npolicies  (runpoint 0.1.0)\n  runpoint_checkpoint_policies: runs, tool-batch\n" in (
        listed
    )
    assert "  runpoint_model_providers: scripted\n" in listed
    assert "  runpoint_storage_backends: postgresql, sqlite\n" in listed
    assert "openai" not in listed


def test_the_host_describes_an_observer_by_its_hooks() -> None:
    class Watcher:
        @hookimpl
        def runpoint_run_started(self) -> None: ...

        @hookimpl
        def runpoint_run_queues(self) -> Mapping[str, object]:
            return {"sqlite": object()}

    [watcher] = [p for p in PluginHost([Watcher()]).plugins() if p.name == "Watcher"]
    assert watcher.distribution is None
    assert watcher.hooks == {"runpoint_run_queues": ["sqlite"], "runpoint_run_started": []}
