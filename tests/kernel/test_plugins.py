"""The plugin host: entry points, the disable switch, validation, third-party policies."""

from __future__ import annotations

import pluggy
import pytest

from runpoint import hookimpl
from runpoint.agent import Agent
from runpoint.errors import ConfigurationError
from runpoint.host import PluginHost
from runpoint.plugins.demo import get_population
from runpoint.services import Runpoint
from tests.conftest import OpenRunpoint


def test_built_ins_and_third_party_plugins_load_from_entry_points() -> None:
    names = {name for name, _ in PluginHost().manager.list_name_plugin()}
    assert {"policies", "scripted", "sql", "every_n_turns"} <= names


def test_plugins_can_be_disabled_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNPOINT_DISABLE_PLUGINS", "scripted, every_n_turns")
    host = PluginHost()
    with pytest.raises(ConfigurationError, match="no model provider 'scripted'"):
        host.model("scripted:demo")
    with pytest.raises(ConfigurationError, match="no checkpoint policy named 'every-n-turns'"):
        host.policy("every-n-turns")
    assert host.policy("tool-batch") is not None


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


async def test_a_third_party_policy_is_chosen_by_name(
    open_runpoint: OpenRunpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNPOINT_EVERY_N_TURNS", "2")
    agent = Agent(id="a", model="scripted:demo", tools=[get_population], checkpoint="every-n-turns")
    rp = await open_runpoint([agent])
    run = await (await rp.create_run("a", "Paris, Tokyo, Lagos and Kyoto")).result()
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
        def runpoint_tool_batch_done(self, executions: list[object]) -> None:
            calls.append(f"batch of {len(executions)}")

        @hookimpl
        def runpoint_checkpoint_written(self, checkpoint: object) -> None:
            calls.append("checkpoint")

        @hookimpl
        def runpoint_run_finished(self, run: object) -> None:
            calls.append("finished")

    agent = Agent(id="a", model="scripted:demo", tools=[get_population])
    async with Runpoint([agent], database=database, host=PluginHost([Watcher()])) as rp:
        run = await (await rp.create_run("a", "Paris")).result()
        first = list(calls)
        calls.clear()
        await (await rp.continue_run(run.run_id, input="Tokyo")).result()  # a new run, at 4
    assert first == [
        "started",
        "message 0",  # the input, written with the run
        "message 1",
        "message 2",
        "batch of 1",
        "checkpoint",
        "message 3",
        "checkpoint",
        "finished",
    ]
    assert calls == [
        "started",
        "message 4",
        "message 5",
        "message 6",
        "batch of 1",
        "checkpoint",
        "message 7",
        "checkpoint",
        "finished",
    ]
