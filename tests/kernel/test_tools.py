"""Tools: schemas from signatures and docstrings, validation, failures, concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Literal, cast

import pytest
from sqlalchemy import event

from runpoint.core.types import RunStatus, ToolCall
from runpoint.facade import CreateRun
from runpoint.plugins.demo import get_population
from runpoint.plugins.scripted import ScriptedModel, call_id
from runpoint.plugins.sql.store import SqlStorage
from runpoint.seams.agent import Agent, tool
from runpoint.seams.model import ModelRequest, ModelResponse
from tests.conftest import BACKENDS, OpenRunpoint

pytestmark = pytest.mark.memory  # storage is not the subject here


def test_schema_comes_from_the_signature_and_docstring() -> None:
    schema = get_population.schema
    assert schema.name == "get_population"
    assert schema.description == "Look up the population of a city."
    assert schema.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": 'The city\'s name, such as "Paris".'}
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_defaults_and_types_reach_the_schema() -> None:
    def search(query: str, limit: int = 5, unit: Literal["km", "mi"] = "km") -> str:
        """Search.

        Args:
            query: What to look for.
            limit (int): At most this many.
        """
        return query

    parameters = tool(name="find")(search).schema.parameters
    assert parameters["required"] == ["query"]
    assert parameters["properties"]["limit"] == {
        "type": "integer",
        "default": 5,
        "description": "At most this many.",
    }
    assert parameters["properties"]["unit"] == {"enum": ["km", "mi"], "default": "km"}


def batch(*calls: tuple[str, Mapping[str, object]]) -> ScriptedModel:
    """A model that calls the given tools in one batch, then reports what it got."""

    def respond(request: ModelRequest) -> ModelResponse:
        if request.messages[-1].role == "user":
            calls_ = [ToolCall(call_id(request, i), n, dict(a)) for i, (n, a) in enumerate(calls)]
            return ModelResponse(tool_calls=calls_)
        results = [m for m in request.messages if m.role == "tool"]
        return ModelResponse(content=" | ".join(f"{m.tool_name}: {m.content}" for m in results))

    return ScriptedModel(respond)


async def test_failing_tools_become_error_results(open_runpoint: OpenRunpoint) -> None:
    def explode(reason: str) -> str:
        raise RuntimeError(reason)

    model = batch(
        ("explode", {"reason": "boom"}),
        ("get_population", {"town": "Paris"}),
        ("teleport", {}),
        ("get_population", {"city": "Paris"}),
    )
    rp = await open_runpoint([Agent(id="a", model=model, tools=[explode, get_population])])
    run = await (await rp.create_run(CreateRun(agent_id="a", message="go"))).result()
    assert run.status is RunStatus.COMPLETED
    tools = (await rp.get_run(run.run_id)).tools
    assert [(t.tool_call_error, t.result) for t in tools] == [
        (True, "RuntimeError: boom"),
        (True, "Invalid arguments for get_population: Object contains unknown field `town`"),
        (True, "Unknown tool 'teleport'."),
        (False, "2.1M"),
    ]


async def test_a_batch_runs_concurrently(open_runpoint: OpenRunpoint) -> None:
    barrier = asyncio.Barrier(3)

    async def meet(name: str) -> str:
        # three calls can only pass the barrier together: a sequential batch would hang
        async with asyncio.timeout(5):
            await barrier.wait()
        return name

    model = batch(*[("meet", {"name": n}) for n in "abc"])
    rp = await open_runpoint([Agent(id="a", model=model, tools=[meet])])
    run = await (await rp.create_run(CreateRun(agent_id="a", message="go"))).result()
    assert run.content == "meet: a | meet: b | meet: c"


async def test_the_number_of_turns_is_bounded(open_runpoint: OpenRunpoint) -> None:
    def forever(request: ModelRequest) -> ModelResponse:
        call = ToolCall(call_id(request), "get_population", {"city": "Lima"})
        return ModelResponse(tool_calls=[call])

    agent = Agent(id="a", model=ScriptedModel(forever), tools=[get_population], max_turns=3)
    rp = await open_runpoint([agent])
    run = await (await rp.create_run(CreateRun(agent_id="a", message="go"))).result()
    assert run.status is RunStatus.ERROR
    assert run.error == "the run reached its limit of 3 turns"
    _, timeline = await rp.timeline(run.run_id)
    # the end at 7 falls on the last batch's checkpoint, which stands (as announced)
    assert [(c.message_index, c.reason) for c in timeline] == [
        (3, "checkpoint"),
        (5, "checkpoint"),
        (7, "checkpoint"),
    ]


@pytest.mark.parametrize("database", BACKENDS, indirect=True)  # a call's id keys its record
@pytest.mark.parametrize(
    ("ids", "kept"),
    [
        ([["call-1", "call-1"]], ["user"]),  # twice in one turn
        ([["call-1"], ["call-1"]], ["user", "assistant", "tool"]),  # again in a later turn
    ],
)
async def test_a_model_that_names_a_tool_call_id_twice_fails_its_turn(
    open_runpoint: OpenRunpoint, ids: list[list[str]], kept: list[str]
) -> None:
    """As any failure of the model: the run ends ERROR at its last boundary, with a message
    that says why. (Before, a side-effecting call's record, keyed by its id, failed with a
    raw IntegrityError on SQL, and the memory backend went on.) A run's reads pair calls
    and results by id too."""

    @tool
    def book(city: str) -> str:
        """Book a city (a side effect: the call is recorded by its id)."""
        return f"{city} booked"

    def reusing(request: ModelRequest) -> ModelResponse:
        turn = sum(m.role == "assistant" for m in request.messages)
        if turn == len(ids):
            return ModelResponse(content="done")
        return ModelResponse(tool_calls=[ToolCall(i, "book", {"city": "Lima"}) for i in ids[turn]])

    rp = await open_runpoint([Agent(id="a", model=ScriptedModel(reusing), tools=[book])])
    run = await (await rp.create_run(CreateRun(agent_id="a", message="go"))).result()
    assert (run.status, run.error) == (
        RunStatus.ERROR,
        "ValueError: model scripted named a second tool call with the id 'call-1' "
        "(a call's id must be unique in its run)",
    )
    assert [m.role for m in (await rp.get_run(run.run_id)).messages] == kept


@pytest.mark.parametrize("database", BACKENDS, indirect=True)  # each call has its record
async def test_a_wide_batch_of_side_effects_takes_few_connections(
    open_runpoint: OpenRunpoint,
) -> None:
    """Every side-effecting call's result is recorded as it finishes. A batch of 2,499 such
    calls, all finishing at once, once wanted a connection each at the same time: the
    whole pool on PostgreSQL (15), every other checkout waiting behind them up to the
    pool's timeout. Results that finish while one is written go together in the next."""

    @tool
    async def book(seat: int) -> str:
        """Book a seat (a side effect: the call is recorded)."""
        return f"seat {seat}"

    width = 2499
    model = batch(*[("book", {"seat": i}) for i in range(width)])
    rp = await open_runpoint([Agent(id="a", model=model, tools=[book])])
    held, most = 0, 0

    def checkout(*_: object) -> None:
        nonlocal held, most
        held += 1
        most = max(most, held)

    def checkin(*_: object) -> None:
        nonlocal held
        held -= 1

    engine = cast(SqlStorage, rp.storage).engine.sync_engine
    event.listen(engine, "checkout", checkout)
    event.listen(engine, "checkin", checkin)
    run = await (await rp.create_run(CreateRun(agent_id="a", message="go"))).result()
    assert (run.status, run.error) == (RunStatus.COMPLETED, None)
    assert most <= 2  # the run's reads and writes, one at a time; a lease's heartbeat
    calls = [t.tool_call_id for t in (await rp.get_run(run.run_id)).tools]
    records = await rp.storage.tool_records(run.run_id, calls)
    assert [(r := records[c]) and r.content for c in calls] == [f"seat {i}" for i in range(width)]
