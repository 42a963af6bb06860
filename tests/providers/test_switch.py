"""Continue a run from an interior checkpoint on another provider: the history, tool call
ids included, is converted to the other vendor's format."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runpoint.core.types import RunStatus, Usage
from runpoint.facade import ContinueRun, CreateRun
from tests.conftest import OpenRunpoint
from tests.providers import wire
from tests.providers.conftest import Api, travel_agent
from tests.providers.test_runs import marked
from tests.providers.wire import Turn

pytestmark = pytest.mark.memory  # storage is not the subject here

QUESTION = "Populations of Paris and Tokyo?"
INSTRUCTIONS = "Use get_population for each city."
CALL_IDS = {"openai": "call_pX7", "openai-chat": "call_cQ2", "anthropic": "toolu_01Ab"}


def source_script(call_id: str) -> list[Turn]:
    return [
        Turn("Looking up Paris.", [(call_id, "get_population", {"city": "Paris"})]),
        Turn(None, [(f"{call_id}_2", "get_population", {"city": "Tokyo"})]),
        Turn("Paris 2.1M, Tokyo 13.9M."),
    ]


def converted_prefix(provider: str, call_id: str) -> dict[str, Any]:
    """The source run's first three messages as the other vendor must receive them (to
    Anthropic, with the breakpoints of a turn after one assistant turn)."""
    args = {"city": "Paris"}
    if provider == "openai":
        return {
            "instructions": INSTRUCTIONS,
            "input": [
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": "Looking up Paris."},
                {
                    "type": "function_call",
                    "call_id": call_id,
                    "name": "get_population",
                    "arguments": json.dumps(args, separators=(",", ":")),
                },
                {"type": "function_call_output", "call_id": call_id, "output": "2.1M"},
            ],
        }
    if provider == "openai-chat":
        call = {
            "id": call_id,
            "type": "function",
            "function": {
                "name": "get_population",
                "arguments": json.dumps(args, separators=(",", ":")),
            },
        }
        return {
            "messages": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": QUESTION},
                {"role": "assistant", "content": "Looking up Paris.", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": call_id, "content": "2.1M"},
            ]
        }
    return {
        "system": [marked({"type": "text", "text": INSTRUCTIONS})],
        "messages": [
            {"role": "user", "content": [marked({"type": "text", "text": QUESTION})]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking up Paris."},
                    {"type": "tool_use", "id": call_id, "name": "get_population", "input": args},
                ],
            },
            {
                "role": "user",
                "content": [
                    marked(
                        {
                            "type": "tool_result",
                            "tool_use_id": call_id,
                            "content": "2.1M",
                        }
                    )
                ],
            },
        ],
    }


@pytest.mark.parametrize(
    ("source_name", "target_name"),
    [
        ("openai", "anthropic"),
        ("anthropic", "openai"),
        ("anthropic", "openai-chat"),
        ("openai-chat", "openai"),
    ],
)
async def test_continue_from_a_checkpoint_on_another_provider(
    apis: dict[str, Api], source_name: str, target_name: str, open_runpoint: OpenRunpoint
) -> None:
    source, target = apis[source_name], apis[target_name]
    runpoint = await open_runpoint([travel_agent(source.spec)])  # the environment's defaults
    source_id = CALL_IDS[source_name]
    source.server.play(*source_script(source_id))
    original = await (
        await runpoint.create_run(CreateRun(agent_id="travel", message=QUESTION))
    ).result()
    assert original.status is RunStatus.COMPLETED, original.error
    _, checkpoints = await runpoint.timeline(original.run_id)
    assert [c.message_index for c in checkpoints] == [3, 5, 6]
    sent_before = len(target.server.requests)  # both OpenAI APIs share one server

    target_id = CALL_IDS[target_name]
    target.server.play(
        Turn(None, [(target_id, "get_population", {"city": "Lagos"})], usage=(30, 4)),
        Turn("Paris 2.1M, Lagos 15.3M.", usage=(50, 9)),
    )
    handle = await runpoint.continue_run(
        ContinueRun(run_id=original.run_id, continue_from=3, model=target.spec)
    )
    run = await handle.result()

    # the stored fork
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.run_id != original.run_id
    assert (run.forked_from_run_id, run.forked_from_message_index) == (original.run_id, 3)
    assert run.model == target.spec
    assert run.usage == Usage(80, 13)  # its own turns
    detail = await runpoint.get_run(run.run_id)
    assert [(m.role, m.model) for m in detail.messages] == [
        ("user", None),
        ("assistant", source.spec),
        ("tool", None),
        ("assistant", target.spec),
        ("tool", None),
        ("assistant", target.spec),
    ]
    assert [(t.tool_call_id, t.result) for t in detail.tools] == [
        (source_id, "2.1M"),
        (target_id, "15.3M"),
    ]
    _, checkpoints = await runpoint.timeline(run.run_id)
    assert [c.message_index for c in checkpoints] == [3, 5, 6]

    # what the other vendor was sent: the converted prefix, then its own call and result
    requests = target.server.requests[sent_before:]
    assert len(requests) == 2
    expected = converted_prefix(target_name, source_id)
    assert {k: requests[0].body.get(k) for k in expected} == expected
    assert target_id in json.dumps(requests[1].body)
    assert "15.3M" in json.dumps(requests[1].body)
    assert requests[1].body["model"] == target.spec.split(":", 1)[1]

    # the source is untouched
    assert (await runpoint.get_run(original.run_id)).run.content == "Paris 2.1M, Tokyo 13.9M."


async def test_a_provider_switched_with_model_sticks_when_its_run_is_continued_from_end(
    apis: dict[str, Api], open_runpoint: OpenRunpoint
) -> None:
    openai, anthropic = apis["openai"], apis["anthropic"]
    runpoint = await open_runpoint([travel_agent(openai.spec)])
    openai.server.play(*source_script(CALL_IDS["openai"]))
    original = await (
        await runpoint.create_run(CreateRun(agent_id="travel", message=QUESTION))
    ).result()
    anthropic.server.play(wire.error("anthropic", 400, "The request was refused"))
    fork = await (
        await runpoint.continue_run(
            ContinueRun(run_id=original.run_id, continue_from=3, model=anthropic.spec)
        )
    ).result()
    assert (fork.status, fork.model) == (RunStatus.ERROR, anthropic.spec)
    sent_to_openai = len(openai.server.requests)

    anthropic.server.play(Turn("Paris 2.1M."))
    run = await (
        await runpoint.continue_run(ContinueRun(run_id=fork.run_id))
    ).result()  # from end, in place

    assert (run.run_id, run.status, run.model) == (fork.run_id, RunStatus.COMPLETED, anthropic.spec)
    assert len(openai.server.requests) == sent_to_openai  # no turn went to OpenAI
    [*_, answer] = (await runpoint.get_run(run.run_id)).messages
    assert (answer.content, answer.model) == ("Paris 2.1M.", anthropic.spec)
