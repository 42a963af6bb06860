"""Prompt caching at the vendor's door: each Anthropic request marks its breakpoints, each
OpenAI request names its conversation's cache key, a later turn reads what an earlier one
cached, and a fork from a checkpoint sends its source's prefix as it was, so the source's
cache serves it; the counts reach the run's usage, its messages and its events. The
loopback servers keep the caches by the vendors' rules (tests.providers.caching)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from runpoint.adapters.litestar.sse import format_event
from runpoint.core.types import Run, RunEvent, RunStatus, Usage
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.seams.agent import Agent
from tests.conftest import OpenRunpoint
from tests.providers.caching import canonical, claude_blocks
from tests.providers.conftest import Api, get_population
from tests.providers.wire import Turn

pytestmark = pytest.mark.memory  # storage is not the subject here

# long enough (about 1,300 tokens) that the vendors cache the prompt from the first turn
INSTRUCTIONS = "Use get_population for each city, and say where each figure comes from. " * 70
QUESTION = "Populations of Paris and Tokyo?"
SCRIPT = [
    Turn("Looking up Paris.", [("call_1", "get_population", {"city": "Paris"})]),
    Turn(None, [("call_2", "get_population", {"city": "Tokyo"})]),
    Turn("Paris 2.1M, Tokyo 13.9M."),
]
STREAMING = pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "one call"])


def agent(api: Api, **settings: Any) -> Agent:
    model = api.model(**settings)
    return Agent(id="travel", model=model, instructions=INSTRUCTIONS, tools=[get_population])


@dataclass
class Forked:
    """A run of three turns and its fork from the checkpoint after its first tool batch:
    what each sent the vendor, and what each stored."""

    source: Run
    fork: Run
    sent: list[dict[str, Any]]  # the source's requests
    fork_sent: dict[str, Any]  # the fork's one request
    turns: list[Usage]  # the source's turns'
    events: list[RunEvent]  # the source's


async def run_and_fork(api: Api, runpoint: Runpoint) -> Forked:
    api.server.play(*SCRIPT)
    handle = await runpoint.create_run(CreateRun(agent_id="travel", message=QUESTION), stream=True)
    events = [e async for e in handle.events()]
    source = await handle.result()
    assert source.status is RunStatus.COMPLETED, source.error
    api.server.play(Turn("Lagos 15.3M."))
    handle = await runpoint.continue_run(
        ContinueRun(run_id=source.run_id, continue_from=3, input="And Lagos?"), stream=True
    )
    assert [e async for e in handle.events()]
    fork = await handle.result()
    assert fork.status is RunStatus.COMPLETED, fork.error
    *sent, fork_sent = [r.body for r in api.server.requests]
    detail = await runpoint.get_run(source.run_id)
    turns = [m.usage for m in detail.messages if m.usage is not None]
    return Forked(source, fork, sent, fork_sent, turns, events)


def claude_prompt(body: dict[str, Any]) -> list[bytes]:
    """The request's prompt as Anthropic's cache reads it, block by block."""
    return [data for data, _ in claude_blocks(body)]


def openai_prompt(body: dict[str, Any]) -> list[bytes]:
    """The request's prompt as OpenAI's cache reads it, item by item."""
    items = body.get("messages") or [body["instructions"], *body["input"]]
    return [canonical(item) for item in [*body["tools"], *items]]


def marks(body: dict[str, Any]) -> list[str]:
    """Where an Anthropic request's breakpoints are: "system", "tools" or "turn <i>"."""
    system = body.get("system")
    found = ["system" for b in system if "cache_control" in b] if isinstance(system, list) else []
    found += ["tools" for t in body.get("tools", []) if "cache_control" in t]
    for i, turn in enumerate(body["messages"]):
        found += [f"turn {i}" for b in turn["content"] if "cache_control" in b]
    return found


@STREAMING
async def test_each_anthropic_turn_marks_breakpoints_and_a_fork_reads_its_sources_cache(
    apis: dict[str, Api], streaming: bool, open_runpoint: OpenRunpoint
) -> None:
    api = apis["anthropic"]
    runpoint = await open_runpoint([agent(api, streaming=streaming)])

    forked = await run_and_fork(api, runpoint)

    # the system prompt, the previous turn's prompt (the user turn before the last
    # assistant turn) and this whole prompt: three of the four breakpoints allowed
    assert [marks(body) for body in forked.sent] == [
        ["system", "turn 0"],
        ["system", "turn 0", "turn 2"],
        ["system", "turn 2", "turn 4"],
    ]
    assert forked.sent[0]["system"] == [
        {"type": "text", "text": INSTRUCTIONS, "cache_control": {"type": "ephemeral"}}
    ]
    # each turn reads the whole of the last turn's prompt and writes what it added
    first, second, third = forked.turns
    assert (first.cache_read_tokens, first.cache_write_tokens) == (0, first.input_tokens)
    assert first.input_tokens > 1024  # the least Sonnet caches
    assert second.cache_read_tokens == first.input_tokens
    assert third.cache_read_tokens == second.input_tokens
    assert third.cache_write_tokens == third.input_tokens - second.input_tokens
    assert forked.source.usage == first + second + third

    # the fork from message 3 sends its source's second prompt as it was (the question
    # joins its last user turn) and reads all of it from the cache its source wrote
    fork_sent, source_sent = claude_prompt(forked.fork_sent), claude_prompt(forked.sent[1])
    assert fork_sent[: len(source_sent)] == source_sent
    assert marks(forked.fork_sent) == ["system", "turn 0", "turn 2"]
    assert [b.get("text") for b in forked.fork_sent["messages"][-1]["content"]] == [
        None,
        "And Lagos?",
    ]
    assert forked.fork.usage.cache_read_tokens == second.input_tokens


@pytest.mark.parametrize("provider", ["openai", "openai-chat"])
@STREAMING
async def test_each_openai_turn_names_its_conversation_and_a_fork_reads_its_sources_cache(
    apis: dict[str, Api], provider: str, streaming: bool, open_runpoint: OpenRunpoint
) -> None:
    api = apis[provider]
    runpoint = await open_runpoint([agent(api, streaming=streaming)])

    forked = await run_and_fork(api, runpoint)

    # one key for the conversation: the id of its first message, which the fork shares
    question = (await runpoint.get_run(forked.source.run_id)).messages[0]
    assert {b["prompt_cache_key"] for b in [*forked.sent, forked.fork_sent]} == {question.id}
    # each prompt starts with the last one, byte for byte (the fork's with its source's
    # second), and reads it from the cache in steps of 128 tokens
    one, two, three, fork = (openai_prompt(b) for b in [*forked.sent, forked.fork_sent])
    for earlier, later in [(one, two), (two, three), (two, fork)]:
        assert later[: len(earlier)] == earlier
    first, second, third = forked.turns
    assert first.cache_read_tokens == 0 and first.input_tokens > 1024
    for cached, turn in [(first, second), (second, third), (second, forked.fork.usage)]:
        assert 0 <= cached.input_tokens - turn.cache_read_tokens <= 128
        assert (turn.cache_read_tokens - 1024) % 128 == 0


async def test_the_cached_tokens_reach_the_events_and_their_wire(
    apis: dict[str, Api], open_runpoint: OpenRunpoint
) -> None:
    api = apis["anthropic"]
    runpoint = await open_runpoint([agent(api)])
    forked = await run_and_fork(api, runpoint)

    completed = [e for e in forked.events if e.event == "ModelRequestCompleted"]
    assert [msgspec.convert(e.data["usage"], Usage) for e in completed] == forked.turns
    [ended] = [e for e in forked.events if e.event == "RunCompleted"]
    wire = json.loads(format_event(completed[1]).split(b"data: ")[1])
    assert wire["cache_read_tokens"] == forked.turns[1].cache_read_tokens > 0  # as Agno's
    assert wire["cache_write_tokens"] == forked.turns[1].cache_write_tokens > 0
    metrics = json.loads(format_event(ended).split(b"data: ")[1])["metrics"]
    assert metrics["cache_read_tokens"] == forked.source.usage.cache_read_tokens


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_an_agent_may_turn_caching_off(
    apis: dict[str, Api], provider: str, open_runpoint: OpenRunpoint
) -> None:
    api = apis[provider]
    runpoint = await open_runpoint([agent(api, prompt_cache=False)])
    api.server.play(*SCRIPT)

    run = await (await runpoint.create_run(CreateRun(agent_id="travel", message=QUESTION))).result()

    assert run.status is RunStatus.COMPLETED, run.error
    bodies = [r.body for r in api.server.requests]
    assert "cache_control" not in json.dumps(bodies) and "prompt_cache_key" not in bodies[0]
    if provider == "anthropic":
        assert all(body["system"] == INSTRUCTIONS for body in bodies)
        assert (run.usage.cache_read_tokens, run.usage.cache_write_tokens) == (0, 0)


async def test_a_turn_that_adds_more_than_twenty_blocks_still_reads_the_last_prompt(
    apis: dict[str, Api], open_runpoint: OpenRunpoint
) -> None:
    """Anthropic looks for a cached prefix 20 blocks back from a breakpoint: a batch of 11
    calls adds 22, so the breakpoint on the last turn's prompt is what finds it."""
    api = apis["anthropic"]
    runpoint = await open_runpoint([agent(api)])
    cities = [{"city": c} for c in ("Paris", "Tokyo", "Lagos") * 4][:11]
    api.server.play(
        Turn(None, [(f"call_{i}", "get_population", city) for i, city in enumerate(cities)]),
        Turn("Done."),
    )

    run = await (await runpoint.create_run(CreateRun(agent_id="travel", message=QUESTION))).result()

    assert run.status is RunStatus.COMPLETED, run.error
    first, second = [m.usage for m in (await runpoint.get_run(run.run_id)).messages if m.usage]
    asked, answered = (claude_prompt(r.body) for r in api.server.requests)
    assert len(answered) - len(asked) == 22
    assert second.cache_read_tokens == first.input_tokens
