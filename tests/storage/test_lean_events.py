"""A boundary's events are stored without what the rows written with them hold (the
checkpoint, a tool call's arguments and result) and read back exactly as they were handed
to the storage: sealed or not, and after retention trims the checkpoints they named."""

from __future__ import annotations

import os
from typing import Any

import msgspec
import pytest
from sqlalchemy import select

from runpoint.core.keyring import Keyring
from runpoint.core.types import Run, RunEvent, ToolCall
from runpoint.facade import CreateRun, Runpoint
from runpoint.plugins.scripted import ScriptedModel, call_id, turns_since_user
from runpoint.plugins.sql.events import batch_of
from runpoint.plugins.sql.schema import run_events
from runpoint.plugins.sql.store import SqlStorage
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import ModelRequest, ModelResponse
from runpoint.seams.retention import Retention

pytestmark = pytest.mark.usefixtures("database")
SAID = "THE-TOOL-SAID-THIS " * 20
ASKED = "AN-ARGUMENT-THE-MODEL-GAVE"


@tool(effect="read")
async def look(topic: str, depth: float = 1.0) -> str:
    """Look a topic up."""
    return f"{SAID}{topic}"


def respond(request: ModelRequest) -> ModelResponse:
    turn = turns_since_user(request.messages)
    if turn == 3:
        return ModelResponse(content="done")
    calls = [
        ToolCall(call_id(request, i), "look", {"topic": f"{ASKED}{i}", "depth": 0.1 * turn})
        for i in range(turn + 1)
    ]
    return ModelResponse(content=f"batch {turn}", tool_calls=calls)


AGENT = Agent(id="lean", model=ScriptedModel(respond), tools=[look])


class Handed(SqlStorage):
    """Keeps the events its writers hand it, encoded as they were then."""

    handed: list[bytes]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handed = []

    async def append_events(self, run: Run, events: Any) -> bool:
        self.handed += [msgspec.json.encode(e) for e in events]
        return await super().append_events(run, events)

    async def save(self, run: Run, *args: Any, events: Any = (), **kwargs: Any) -> None:
        await super().save(run, *args, events=events, **kwargs)
        self.handed += [msgspec.json.encode(e) for e in events]


async def stored_events(storage: SqlStorage) -> bytes:
    """The event log's rows as stored (unsealed), in JSON."""
    async with storage.engine.connect() as conn:
        rows = (await conn.scalars(select(run_events.c.data))).all()
    assert any(row.startswith(b"\x7f") for row in rows)  # deflated, those of some size
    return b"".join(msgspec.json.encode(batch_of(row)) for row in rows)


@pytest.mark.parametrize("sealed", [False, True], ids=["clear", "sealed"])
async def test_events_read_back_byte_for_byte_without_repeating_rows(
    database: str, sealed: bool
) -> None:
    if database == "memory:":
        pytest.skip("the SQL storage's encoding")
    storage = Handed(database)
    keyring = Keyring({"k": os.urandom(32)}) if sealed else None
    async with Runpoint([AGENT], storage=storage, keyring=keyring) as rp:
        run = await (await rp.create_run(CreateRun(agent_id="lean", message="go"))).result()
        read = await storage.read_events(run, 0, 10_000)
        assert [msgspec.json.encode(e) for e in read] == storage.handed
        names = [e.event for e in read]
        assert names.count("CheckpointCreated") == 4 and names.count("ToolCallCompleted") == 6
        if not sealed:  # what the rows hold is not in the log again
            log = await stored_events(storage)
            assert SAID.encode() not in log and ASKED.encode() not in log
            for e in read:
                if e.event == "CheckpointCreated":
                    assert e.data["checkpoint"]["checkpoint_id"].encode() not in log
        # read from any point, in pages: each page puts back what its events left out
        for after in range(0, len(read), 3):
            page = await storage.read_events(run, after, 4)
            assert [msgspec.json.encode(e) for e in page] == storage.handed[after : after + 4]


async def test_trimmed_checkpoints_stay_in_their_events(database: str) -> None:
    if database == "memory:":
        pytest.skip("the SQL storage's encoding")
    storage = Handed(database)
    async with Runpoint([AGENT], storage=storage, retention=Retention(checkpoints=1)) as rp:
        run = await (await rp.create_run(CreateRun(agent_id="lean", message="go"))).result()
        removed = await rp.sweeper.sweep_all()
        assert removed.checkpoints == 3
        read: list[RunEvent] = await storage.read_events(run, 0, 10_000)
        assert [msgspec.json.encode(e) for e in read] == storage.handed
        joined = [e for batch in [b async for b in await rp.follow(run.run_id)] for e in batch]
        assert joined == read
