"""Each kind of edit, at the vendor's door: the first request the forked run makes is the
edited history, exactly as the vendor's format writes it, and the source run's snapshots
are the same bytes before and after. On both databases (a fork born with edits lays its
own rows out between its source's)."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from runpoint.core.types import RunStatus
from runpoint.facade import ContinueRun, CreateRun, Runpoint
from runpoint.runs.edits import (
    EditRequest,
    ReplaceToolArguments,
    ReplaceToolResult,
    ReplaceUserMessage,
)
from tests.conftest import OpenRunpoint
from tests.providers.conftest import Api, travel_agent
from tests.providers.wire import Turn

QUESTION = "Populations of Paris and Tokyo?"
PARIS, TOKYO, LAGOS = {"city": "Paris"}, {"city": "Tokyo"}, {"city": "Lagos"}
SYSTEM = {"role": "system", "content": "Use get_population for each city."}


def turn(tokyo: dict[str, str]) -> dict[str, Any]:
    """The assistant turn that looks both cities up, as Chat Completions carries it."""
    return {
        "role": "assistant",
        "content": "Looking up.",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": "get_population",
                    "arguments": json.dumps(args, separators=(",", ":")),
                },
            }
            for call_id, args in (("call_1", PARIS), ("call_2", tokyo))
        ],
    }


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


# each kind of edit: where the fork continues from, the edit, and the history its model is
# sent first
CASES: dict[str, tuple[int, EditRequest, list[dict[str, Any]]]] = {
    "user_message": (
        1,
        ReplaceUserMessage("Lagos?"),
        [SYSTEM, {"role": "user", "content": "Lagos?"}],
    ),
    "tool_result": (
        4,
        ReplaceToolResult("call_1", "99M"),
        [
            SYSTEM,
            {"role": "user", "content": QUESTION},
            turn(TOKYO),
            result("call_1", "99M"),
            result("call_2", "13.9M"),
        ],
    ),
    "tool_arguments": (
        4,
        ReplaceToolArguments("call_2", LAGOS),
        [
            SYSTEM,
            {"role": "user", "content": QUESTION},
            turn(LAGOS),
            result("call_1", "2.1M"),
            result("call_2", "15.3M"),
        ],
    ),
}


async def snapshots(rp: Runpoint, run_id: str) -> list[bytes]:
    count = (await rp.get_run(run_id)).run.message_count
    return [msgspec.json.encode(await rp.snapshot(run_id, k)) for k in range(count + 1)]


@pytest.mark.parametrize("kind", list(CASES))
async def test_the_forks_first_request_is_the_edited_history(
    kind: str, apis: dict[str, Api], open_runpoint: OpenRunpoint
) -> None:
    api = apis["openai-chat"]
    rp = await open_runpoint([travel_agent(api.model(streaming=False))])
    api.server.play(
        Turn(
            "Looking up.",
            [("call_1", "get_population", PARIS), ("call_2", "get_population", TOKYO)],
        ),
        Turn("Paris 2.1M, Tokyo 13.9M."),
    )
    source = await (await rp.create_run(CreateRun(agent_id="travel", message=QUESTION))).result()
    assert source.status is RunStatus.COMPLETED and source.message_count == 5, source.error
    before = await snapshots(rp, source.run_id)

    continue_from, edit, expected = CASES[kind]
    sent = len(api.server.requests)
    api.server.play(Turn("Done."))
    fork = await (
        await rp.continue_run(
            ContinueRun(run_id=source.run_id, continue_from=continue_from, edits=[edit])
        )
    ).result()

    assert fork.status is RunStatus.COMPLETED, fork.error
    [first] = api.server.requests[sent:]
    assert first.body["messages"] == expected
    assert await snapshots(rp, source.run_id) == before
