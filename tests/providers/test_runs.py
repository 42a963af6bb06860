"""A run with several tool batches on each API, streamed and not: what the SDK sent, what
runpoint stored."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runpoint.core.types import RunStatus, Usage
from runpoint.facade import CreateRun
from tests.conftest import OpenRunpoint
from tests.providers.conftest import Api, travel_agent
from tests.providers.wire import Turn

pytestmark = pytest.mark.memory  # storage is not the subject here

QUESTION = "Populations of Paris, Atlantis and Tokyo?"
ATLANTIS_ERROR = "LookupError: no population known for Atlantis"
PARIS = {"city": "Paris"}
ATLANTIS = {"city": "Atlantis"}
TOKYO = {"city": "Tokyo"}
SCRIPT = [
    Turn(
        "Looking up two cities.",
        [("call_1", "get_population", PARIS), ("call_2", "get_population", ATLANTIS)],
        usage=(20, 8),
    ),
    Turn(None, [("call_3", "get_population", TOKYO)], usage=(40, 6)),
    Turn("Paris 2.1M, Tokyo 13.9M; Atlantis is unknown.", usage=(60, 12)),
]
PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string", "description": "The city's name."}},
    "required": ["city"],
    "additionalProperties": False,
}
DESCRIPTION = "Look up the population of a city."


def _args(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, separators=(",", ":"))


def marked(block: dict[str, Any]) -> dict[str, Any]:
    """A block marked as an Anthropic cache breakpoint."""
    return block | {"cache_control": {"type": "ephemeral"}}


# What each API was sent on the last turn: the tools, and the whole converted history.
EXPECTED: dict[str, dict[str, Any]] = {
    "openai": {
        "instructions": "Use get_population for each city.",
        "tools": [
            {
                "type": "function",
                "name": "get_population",
                "description": DESCRIPTION,
                "parameters": PARAMETERS,
                "strict": False,
            }
        ],
        "input": [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": "Looking up two cities."},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_population",
                "arguments": _args(PARIS),
            },
            {
                "type": "function_call",
                "call_id": "call_2",
                "name": "get_population",
                "arguments": _args(ATLANTIS),
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "2.1M"},
            {"type": "function_call_output", "call_id": "call_2", "output": ATLANTIS_ERROR},
            {
                "type": "function_call",
                "call_id": "call_3",
                "name": "get_population",
                "arguments": _args(TOKYO),
            },
            {"type": "function_call_output", "call_id": "call_3", "output": "13.9M"},
        ],
    },
    "openai-chat": {
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_population",
                    "description": DESCRIPTION,
                    "parameters": PARAMETERS,
                },
            }
        ],
        "messages": [
            {"role": "system", "content": "Use get_population for each city."},
            {"role": "user", "content": QUESTION},
            {
                "role": "assistant",
                "content": "Looking up two cities.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_population", "arguments": _args(PARIS)},
                    },
                    {
                        "id": "call_2",
                        "type": "function",
                        "function": {"name": "get_population", "arguments": _args(ATLANTIS)},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "2.1M"},
            {"role": "tool", "tool_call_id": "call_2", "content": ATLANTIS_ERROR},
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": "call_3",
                        "type": "function",
                        "function": {"name": "get_population", "arguments": _args(TOKYO)},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_3", "content": "13.9M"},
        ],
    },
    "anthropic": {
        # breakpoints: the system prompt, the previous turn's prompt and this one
        "system": [marked({"type": "text", "text": "Use get_population for each city."})],
        "tools": [
            {"name": "get_population", "description": DESCRIPTION, "input_schema": PARAMETERS}
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking up two cities."},
                    {"type": "tool_use", "id": "call_1", "name": "get_population", "input": PARIS},
                    {
                        "type": "tool_use",
                        "id": "call_2",
                        "name": "get_population",
                        "input": ATLANTIS,
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_1",
                        "content": "2.1M",
                    },
                    marked(
                        {
                            "type": "tool_result",
                            "tool_use_id": "call_2",
                            "content": ATLANTIS_ERROR,
                            "is_error": True,
                        }
                    ),
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "call_3", "name": "get_population", "input": TOKYO}
                ],
            },
            {
                "role": "user",
                "content": [
                    marked(
                        {
                            "type": "tool_result",
                            "tool_use_id": "call_3",
                            "content": "13.9M",
                        }
                    )
                ],
            },
        ],
    },
}
# Where each API takes the per-agent settings.
SETTINGS: dict[str, dict[str, Any]] = {
    "openai": {"temperature": 0.3, "max_output_tokens": 256},
    "openai-chat": {"temperature": 0.3, "max_completion_tokens": 256},
    "anthropic": {"max_tokens": 256},
}


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "whole"])
async def test_a_run_of_several_tool_batches(
    api: Api, streaming: bool, open_runpoint: OpenRunpoint
) -> None:
    sampling = {"temperature": 0.3} if api.provider != "anthropic" else {}
    model = api.model(max_tokens=256, streaming=streaming, **sampling)
    runpoint = await open_runpoint([travel_agent(model)])
    api.server.play(*SCRIPT)

    handle = await runpoint.create_run(CreateRun(agent_id="travel", message=QUESTION), stream=True)
    events = [event async for event in handle.events()]
    run = await handle.result()

    # the stored run
    assert run.status is RunStatus.COMPLETED, run.error
    assert run.content == "Paris 2.1M, Tokyo 13.9M; Atlantis is unknown."
    assert run.usage == Usage(120, 26)
    detail = await runpoint.get_run(run.run_id)
    assert [m.role for m in detail.messages] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert [m.usage for m in detail.messages if m.role == "assistant"] == [
        Usage(20, 8),
        Usage(40, 6),
        Usage(60, 12),
    ]
    assert all(m.model == api.spec for m in detail.messages if m.role == "assistant")
    assert [(t.tool_call_id, t.tool_args, t.result, t.tool_call_error) for t in detail.tools] == [
        ("call_1", PARIS, "2.1M", False),
        ("call_2", ATLANTIS, ATLANTIS_ERROR, True),
        ("call_3", TOKYO, "13.9M", False),
    ]
    _, checkpoints = await runpoint.timeline(run.run_id)
    assert [(c.message_index, c.reason) for c in checkpoints] == [
        (4, "checkpoint"),
        (6, "checkpoint"),
        (7, "end"),
    ]

    # what the SDK sent
    requests = api.server.requests
    assert len(requests) == 3
    last = requests[-1].body
    assert {k: last.get(k) for k in EXPECTED[api.provider]} == EXPECTED[api.provider]
    assert {k: last.get(k) for k in SETTINGS[api.provider]} == SETTINGS[api.provider]
    assert last["model"] == api.spec.split(":", 1)[1]
    assert bool(last.get("stream")) is streaming
    for request in requests:  # the agent's own key, not the environment's
        assert "sk-agent" in request.headers.get("authorization", "") + request.headers.get(
            "x-api-key", ""
        )

    # what a watching client saw: the text, and the arguments as they were written
    text = "".join(e.data["content"] for e in events if e.event == "RunContent")
    assert text == "Looking up two cities.Paris 2.1M, Tokyo 13.9M; Atlantis is unknown."
    written: list[dict[int, str]] = []  # per model turn: each call's arguments, joined
    for event in events:
        if event.event == "ModelRequestStarted":
            written.append({})
        elif event.event == "ToolCallDelta":
            index = event.data["index"]
            written[-1][index] = written[-1].get(index, "") + event.data["arguments"]
    if streaming:
        assert [{i: json.loads(a) for i, a in turn.items()} for turn in written] == [
            {0: PARIS, 1: ATLANTIS},
            {0: TOKYO},
            {},
        ]
        first = [e.data for e in events if e.event == "ToolCallDelta" and "id" in e.data]
        assert [(d["index"], d["id"], d["name"]) for d in first] == [
            (0, "call_1", "get_population"),
            (1, "call_2", "get_population"),
            (0, "call_3", "get_population"),
        ]
    else:
        assert written == [{}, {}, {}]
