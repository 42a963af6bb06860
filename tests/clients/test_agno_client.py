"""Agno 3.1.10's own `AgentOSClient` against `runpoint serve`: every method that touches
agents, teams, sessions, runs, streams, continue, cancel and delete answers in the client's own
types, and the client logs no error (it logs, rather than raises, what it cannot parse).
The methods runpoint does not serve are listed in docs/http.md."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from agno.client import AgentOSClient
from agno.db.base import SessionType
from agno.models.response import ToolExecution
from agno.os.schema import AgentSessionDetailSchema, RunSchema, SessionRunPreviewSchema
from agno.run import team
from agno.run.agent import (
    ModelRequestCompletedEvent,
    RunCompletedEvent,
    RunOutput,
    RunOutputEvent,
    RunPausedEvent,
    RunStartedEvent,
    ToolCallCompletedEvent,
)
from agno.utils.log import logger as agno_logger

from runpoint.plugins.sql import packs
from tests.clients.conftest import LONG
from tests.long_runs import SAID, asked, transcript

# one event loop for the module: Agno's client shares one httpx client across calls
pytestmark = pytest.mark.asyncio(loop_scope="module")

PROMPT = "Compare the populations of Paris, Tokyo, and Lagos in one sentence."


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(autouse=True)
def no_client_errors() -> Iterator[None]:
    """Agno's logger does not propagate: listen on it directly."""
    records = Records()
    agno_logger.addHandler(records)
    try:
        yield
    finally:
        agno_logger.removeHandler(records)
    assert [r.getMessage() for r in records.records] == []


@pytest.fixture
def client(server: str) -> AgentOSClient:
    return AgentOSClient(base_url=server, timeout=30)


async def collect(events: AsyncIterator[RunOutputEvent]) -> list[RunOutputEvent]:
    return [event async for event in events]


async def test_config_and_agents(client: AgentOSClient) -> None:
    config = await client.aget_config()
    assert [a.id for a in config.agents] == [
        "travel-agent",
        "checkpoint-agent",
        "booking-agent",
        "planner-agent",
    ]
    assert client.get_config().os_id == config.os_id
    summaries = await client.list_agents()
    assert summaries[0].model is not None and summaries[0].model.id == "scripted:demo"
    # the storage each agent's sessions are in, as agent-ui reads it to list them
    assert {s.db_id for s in summaries} == set(config.databases) == {"runpoint"}
    agent = await client.aget_agent("booking-agent")
    assert agent.name == "Booking Agent"
    assert agent.model is not None and agent.model.provider == "scripted"
    assert agent.tools is not None
    (tool,) = agent.tools["tools"]
    assert tool["name"] == "book_trip" and tool["requires_confirmation"] is True
    assert client.get_agent("travel-agent").id == "travel-agent"


async def test_run_stream_and_continue_from(client: AgentOSClient) -> None:
    run = await client.run_agent("travel-agent", PROMPT)
    assert isinstance(run, RunOutput) and run.status is not None
    assert run.status.value == "COMPLETED"
    assert run.agent_name == "Travel Agent" and run.model_provider == "scripted"
    assert run.metrics is not None and run.metrics.total_tokens > 0
    assert run.metrics.duration is not None
    assert run.messages is not None and all(m.from_history is False for m in run.messages)

    events = await collect(client.run_agent_stream("travel-agent", PROMPT))
    names = [e.event for e in events]
    assert names[0] == "RunStarted" and names[-1] == "RunCompleted"
    assert {(e.agent_id, e.agent_name) for e in events} == {("travel-agent", "Travel Agent")}
    assert "CheckpointCreated" not in names
    usage = next(e for e in events if isinstance(e, ModelRequestCompletedEvent))
    assert usage.total_tokens and usage.input_tokens is not None
    completed = events[-1]
    assert isinstance(completed, RunCompletedEvent) and completed.metrics is not None
    assert completed.metrics.total_tokens > 0

    assert run.run_id is not None and run.session_id is not None
    forked = await client.continue_agent_run(
        "travel-agent", run.run_id, tools=[], session_id=run.session_id, continue_from=3
    )
    assert forked.run_id != run.run_id and forked.status is not None
    assert forked.status.value == "COMPLETED"
    # a completed run continued from its end (no continue_from) goes on, as with AgentOS
    again = await client.continue_agent_run(
        "travel-agent", run.run_id, tools=[], session_id=run.session_id
    )
    assert again.run_id != run.run_id
    streamed = await collect(
        client.continue_agent_run_stream(
            "travel-agent", run.run_id, tools=[], session_id=run.session_id, continue_from=5
        )
    )
    assert [e.event for e in streamed][-1] == "RunCompleted"

    # cancel is idempotent: a finished run answers 200 and stays as it was
    await client.cancel_agent_run("travel-agent", run.run_id)


async def test_tool_decisions(client: AgentOSClient) -> None:
    events = await collect(client.run_agent_stream("booking-agent", "Book Kyoto"))
    paused = events[-1]
    assert isinstance(paused, RunPausedEvent) and paused.tools
    (tool,) = paused.tools
    assert isinstance(tool, ToolExecution) and tool.requires_confirmation
    tool.confirmed = True
    assert paused.run_id is not None
    resumed = await collect(
        client.continue_agent_run_stream(
            "booking-agent", paused.run_id, tools=[tool], session_id=paused.session_id
        )
    )
    assert [e.event for e in resumed][-1] == "RunCompleted"

    run = await client.run_agent("booking-agent", "Book Lima")
    assert run.status is not None and run.status.value == "PAUSED" and run.tools
    (tool,) = run.tools
    tool.confirmed = False
    assert run.run_id is not None
    done = await client.continue_agent_run(
        "booking-agent", run.run_id, tools=[tool], session_id=run.session_id
    )
    assert done.status is not None and done.status.value == "COMPLETED"


async def test_sessions(client: AgentOSClient) -> None:
    run = await client.run_agent("travel-agent", PROMPT, session_id="agno-client")
    assert run.run_id is not None

    page = await client.get_sessions()
    assert {s.session_id: s.session_name for s in page.data}["agno-client"] == PROMPT
    session = await client.get_session("agno-client")
    assert isinstance(session, AgentSessionDetailSchema)
    assert session.agent_session_id == "agno-client" and session.session_name == PROMPT

    runs = await client.get_session_runs("agno-client")
    assert [r.run_id for r in runs] == [run.run_id]
    assert isinstance(runs[0], RunSchema) and runs[0].messages and runs[0].tools
    one = await client.get_session_run("agno-client", run.run_id)
    assert one.run_id == run.run_id and one.run_input == PROMPT

    await client.delete_session("agno-client")
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.get_session("agno-client")
    assert refused.value.response.status_code == 404


async def test_session_lifecycle(client: AgentOSClient) -> None:
    """Create, run in, name, preview and delete sessions, as AgentOS's control plane does."""
    made = await client.create_session(agent_id="travel-agent", session_name="Trip")
    assert isinstance(made, AgentSessionDetailSchema)
    assert made.session_name == "Trip" and made.agent_id == "travel-agent"
    empty = await client.create_session(agent_id="travel-agent", session_id="agno-empty")
    assert isinstance(empty, AgentSessionDetailSchema)
    assert (empty.session_id, empty.session_name) == ("agno-empty", "")  # AgentOS's default
    with pytest.raises(httpx.HTTPStatusError) as taken:
        await client.create_session(agent_id="travel-agent", session_id="agno-empty")
    assert taken.value.response.status_code == 409

    run = await client.run_agent("travel-agent", PROMPT, session_id=made.session_id)
    assert run.session_id == made.session_id and run.run_id is not None
    previews = await client.aget_session_run_previews(made.session_id)
    assert previews == client.get_session_run_previews(made.session_id)
    (preview,) = previews
    assert isinstance(preview, SessionRunPreviewSchema)
    assert (preview.run_id, preview.status, preview.run_input) == (run.run_id, "COMPLETED", PROMPT)
    assert preview.content_preview == run.content

    renamed = await client.rename_session(made.session_id, "Trip to Lagos")
    assert isinstance(renamed, AgentSessionDetailSchema)
    assert renamed.session_name == "Trip to Lagos"
    updated = await client.update_session(made.session_id, session_name="Lagos")
    assert updated.session_name == "Lagos"
    assert (await client.get_session(made.session_id)).session_name == "Lagos"
    page = await client.get_sessions()
    assert {s.session_id: s.session_name for s in page.data}[made.session_id] == "Lagos"
    with pytest.raises(httpx.HTTPStatusError) as unkept:
        await client.update_session(made.session_id, session_state={"city": "Lagos"})
    assert unkept.value.response.status_code == 422

    both = [made.session_id, "agno-empty"]
    await client.delete_sessions(both, [SessionType.AGENT, SessionType.AGENT])
    for session_id in both:
        with pytest.raises(httpx.HTTPStatusError) as gone:
            await client.get_session(session_id)
        assert gone.value.response.status_code == 404


# -- teams (AgentOS's /teams, served by the demo's travel-team) --------------------


async def test_teams_are_listed_with_their_members(client: AgentOSClient) -> None:
    (listed,) = await client.list_teams()
    assert (listed.id, listed.name) == ("travel-team", "Travel Team")
    detail = await client.aget_team("travel-team")
    assert [m.id for m in detail.members or []] == ["travel-agent", "planner-agent"]
    config = await client.aget_config()
    assert [t.id for t in config.teams or []] == ["travel-team"]


async def test_a_team_run_nests_its_members_runs(client: AgentOSClient) -> None:
    run = await client.run_team("travel-team", "Paris")
    assert isinstance(run, team.TeamRunOutput)
    assert (run.team_id, run.team_name, run.status) == ("travel-team", "Travel Team", "COMPLETED")
    assert run.content == (
        "The team says: travel-agent: Here is what I found. Paris: 2.1M.; "
        "planner-agent: Here is what I found. Paris: Paris is in the plan.."
    )
    members = run.member_responses
    assert all(isinstance(m, RunOutput) for m in members)
    assert sorted(
        (m.agent_id, m.agent_name, m.parent_run_id) for m in members if isinstance(m, RunOutput)
    ) == [
        ("planner-agent", "Planner Agent", run.run_id),
        ("travel-agent", "Travel Agent", run.run_id),
    ]
    await client.cancel_team_run("travel-team", run.run_id or "")  # ended: answered as is


async def test_a_team_run_streams_team_events(client: AgentOSClient) -> None:
    events = [e async for e in client.run_team_stream("travel-team", "Kyoto")]
    assert isinstance(events[0], team.RunStartedEvent) and events[0].team_id == "travel-team"
    assert isinstance(events[-1], team.RunCompletedEvent)
    own = [e for e in events if isinstance(e, team.BaseTeamRunEvent)]
    assert {(e.team_id, e.team_name) for e in own} == {("travel-team", "Travel Team")}
    delegations = [e for e in events if isinstance(e, team.ToolCallCompletedEvent)]
    assert len(delegations) == 2  # one to each member, in one batch
    # the members' events, as AgentOS relays them: agent events of the member runs
    started = [e for e in events if isinstance(e, RunStartedEvent)]
    assert sorted((e.agent_id, e.agent_name) for e in started) == [
        ("planner-agent", "Planner Agent"),
        ("travel-agent", "Travel Agent"),
    ]
    assert {e.parent_run_id for e in started} == {events[0].run_id}
    completed = [e for e in events if isinstance(e, RunCompletedEvent)]
    assert {e.run_id for e in completed} == {e.run_id for e in started}
    assert events.index(delegations[0]) > max(events.index(e) for e in completed)


# -- a run at the size users reach: its windows packed (tests/long_runs.py) ---------


async def test_a_long_run_streamed_read_and_continued_from_a_packed_window(
    long_server: str,
) -> None:
    client = AgentOSClient(base_url=long_server, timeout=60)
    events = await collect(client.run_agent_stream("long", LONG))
    assert isinstance(events[0], RunStartedEvent) and isinstance(events[-1], RunCompletedEvent)
    done = [e for e in events if isinstance(e, ToolCallCompletedEvent)]
    assert [e.tool.result if e.tool else None for e in done] == [f"{SAID}t"] * asked(LONG)
    run_id, session_id = events[0].run_id or "", events[0].session_id or ""

    read = await client.get_session_run(session_id, run_id)
    assert isinstance(read, RunSchema) and read.messages is not None
    assert [(m["role"], m["content"]) for m in read.messages] == transcript(LONG)
    (listed,) = await client.get_session_runs(session_id)
    assert isinstance(listed, RunSchema) and listed.messages == read.messages

    at = 2 * packs.WINDOW - 27  # a checkpoint inside the second window, packed
    forked = await collect(
        client.continue_agent_run_stream(
            "long", run_id, tools=[], session_id=session_id, continue_from=at
        )
    )
    assert [e.event for e in forked][-1] == "RunCompleted"
    fork_id = forked[0].run_id or ""
    assert fork_id != run_id
    fork = await client.get_session_run(session_id, fork_id)
    assert isinstance(fork, RunSchema) and fork.messages is not None
    assert fork.messages[:at] == read.messages[:at]  # the source's, then its own
    assert {m["id"] for m in fork.messages[at:]}.isdisjoint(m["id"] for m in read.messages)
    assert [(m["role"], m["content"]) for m in fork.messages] == transcript(LONG)
    again = await client.continue_agent_run(
        "long", run_id, tools=[], session_id=session_id, continue_from=packs.WINDOW + 1
    )
    assert again.status is not None and again.status.value == "COMPLETED"
    assert [(m.role, m.content) for m in again.messages or []] == transcript(LONG)
    assert [m.id for m in again.messages or []][: packs.WINDOW + 1] == [
        m["id"] for m in read.messages[: packs.WINDOW + 1]
    ]
    assert {m.id for m in (again.messages or [])[packs.WINDOW + 1 :]}.isdisjoint(
        m["id"] for m in read.messages
    )
