"""A scripted agent whose runs are long enough to be packed (plugins/sql/packs.py): a tool
batch a turn, as many turns as its input's first word says if a number (else TURNS), then
"done"; and one (PAUSING) whose call of the turn its input's second word says is one a
person must confirm. What such a run must read back as (`transcript`,
`checkpoint_indexes`), and the (first index, n) of its rows as stored (`packed`).

Served by `runpoint serve --app tests.long_runs:agents` for the users' clients."""

from __future__ import annotations

import msgspec
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from runpoint.core.types import Run, RunStatus, ToolCall
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel, call_id, turns_since_user
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import ModelRequest, ModelResponse
from tests.storage.test_encryption import async_url

TURNS = 47  # tool batches by default: 96 messages
SAID = "A-RESULT-NOBODY-MAY-READ "


@tool(effect="read")
async def look(topic: str) -> str:
    """Look a topic up."""
    return f"{SAID}{topic}"


def asked(said: str) -> int:
    """The turns an input asks for."""
    first = said.split()[0] if said.split() else ""
    return int(first) if first.isdigit() else TURNS


@tool(requires_confirmation=True)
async def ask(topic: str) -> str:
    """Ask a person about a topic."""
    return f"asked about {topic}"


def respond(request: ModelRequest) -> ModelResponse:
    turn = turns_since_user(request.messages)
    said = next(m.content or "" for m in reversed(request.messages) if m.role == "user")
    if turn >= asked(said):
        return ModelResponse(content="done")
    name = "ask" if said.split()[1:2] == [str(turn)] else "look"
    return ModelResponse(
        content=f"turn {turn}", tool_calls=[ToolCall(call_id(request, 0), name, {"topic": "t"})]
    )


AGENT = Agent(id="long", model=ScriptedModel(respond), tools=[look], max_turns=500)
PAUSING = Agent(id="pausing", model=ScriptedModel(respond), tools=[look, ask], max_turns=500)
agents = [AGENT]


def transcript(said: str) -> list[tuple[str, str]]:
    """A run's (role, content) from its input on: the tool batches it asks for, then done."""
    turns = asked(said)
    batches = [
        (r, c) for t in range(turns) for r, c in (("assistant", f"turn {t}"), ("tool", f"{SAID}t"))
    ]
    return [("user", said), *batches, ("assistant", "done")]


def checkpoint_indexes(count: int, first: int = 3) -> list[int]:
    """A run's checkpoints: after each tool batch (the first closing at `first`), and its
    end at `count`."""
    return [*range(first, count, 2), count]


async def packed(database: str, table: str, run_id: str) -> list[tuple[int, int]]:
    """The (first index, n) of the run's rows of `table`."""
    key = "idx" if table == "messages" else "message_index"
    engine = create_async_engine(async_url(database))
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(f"SELECT {key}, n FROM {table} WHERE run_id = :r ORDER BY {key}"), {"r": run_id}
        )
        found = [(int(i), int(n)) for i, n in rows]
    await engine.dispose()
    return found


async def a_long_run(rp: Runpoint, message: str = "go") -> Run:
    run = await (await rp.create_run(CreateRun(agent_id="long", message=message))).result()
    assert run.status is RunStatus.COMPLETED and run.message_count == 2 + 2 * asked(message)
    return run


async def assert_read_back(rp: Runpoint, run_id: str, said: str, handed: list[bytes]) -> None:
    """The run reads back whole, each message and checkpoint once, its events as they were
    handed to the storage (`Handed`), byte for byte."""
    detail = await rp.get_run(run_id)
    run, messages = detail.run, detail.messages
    assert run.status is RunStatus.COMPLETED
    assert [(m.role, m.content) for m in messages] == transcript(said)
    assert len({m.id for m in messages}) == len(messages)
    timeline = (await rp.timeline(run_id))[1]
    assert [c.message_index for c in timeline] == checkpoint_indexes(run.message_count)
    events = await rp.storage.read_events(run, 0, 100_000)
    assert [msgspec.json.encode(e) for e in events] == handed
