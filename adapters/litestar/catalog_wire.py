"""The run dialect's JSON shapes of what a server holds, besides runs (see wire.py): its
agents and /config, sessions, their runs' previews, a forked session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from runpoint.core.types import Run, Session
from runpoint.seams.agent import Agent
from runpoint.seams.crew import Crew

from .wire import provider

# AgentOS's id of the database holding an agent's sessions: every agent's is the one
# database runpoint serves from
DB_ID = "runpoint"


class SessionOut(msgspec.Struct):
    session_id: str
    agent_session_id: str
    session_name: str
    agent_id: str
    user_id: str | None
    forked_from_session_id: str | None
    created_at: int
    updated_at: int
    session_state: None = None


class RunPreviewOut(msgspec.Struct):
    run_id: str
    agent_id: str
    user_id: str | None
    status: str
    run_input: str | None
    content_preview: str | None
    created_at: int


class PageMeta(msgspec.Struct):
    page: int
    limit: int


class PageInfo(msgspec.Struct):
    """AgentOS's PaginationInfo: a page of `limit` items out of `total_count`."""

    page: int
    limit: int
    total_pages: int
    total_count: int

    @classmethod
    def of(cls, page: int, limit: int, total: int) -> PageInfo:
        return cls(page, limit, (total + limit - 1) // limit, total)


class SessionPage(msgspec.Struct):
    data: list[SessionOut]
    meta: PageMeta


class ForkedSession(msgspec.Struct):
    session_id: str
    forked_from_session_id: str


class ToolOut(msgspec.Struct):
    name: str
    description: str
    parameters: dict[str, Any]
    requires_confirmation: bool


class ModelOut(msgspec.Struct):
    """AgentOS's two model shapes at once: {id, provider} in summaries, {name, model,
    provider} in an agent's detail."""

    id: str
    name: str
    model: str
    provider: str


class ToolsOut(msgspec.Struct):
    tools: list[ToolOut]


class AgentOut(msgspec.Struct):
    id: str
    name: str | None
    db_id: str
    model: ModelOut
    instructions: str | None
    checkpoint: str
    tools: ToolsOut


class TeamOut(AgentOut):
    """A team of agents: its leader, as an agent, and its members."""

    members: list[AgentOut]


class ConfigOut(msgspec.Struct):
    """AgentOS's /config, for what runpoint has: agents and teams (no workflows or
    interfaces)."""

    os_id: str
    name: str
    agents: list[AgentOut]
    databases: list[str] = msgspec.field(default_factory=lambda: [DB_ID])
    teams: list[TeamOut] = msgspec.field(default_factory=list)
    workflows: list[Any] = msgspec.field(default_factory=list)
    interfaces: list[Any] = msgspec.field(default_factory=list)


def session(s: Session, name: str) -> SessionOut:
    """The session, named `name` (`Runpoint.session_names` says it)."""
    return SessionOut(
        session_id=s.session_id,
        agent_session_id=s.session_id,
        session_name=name,
        agent_id=s.agent_id,
        user_id=s.user_id,
        forked_from_session_id=s.forked_from_session_id,
        created_at=int(s.created_at),
        updated_at=int(s.updated_at),
    )


PREVIEW_CHARACTERS = 280  # AgentOS's


def run_preview(r: Run) -> RunPreviewOut:
    return RunPreviewOut(
        run_id=r.run_id,
        agent_id=r.agent_id,
        user_id=r.user_id,
        status=r.status.value,
        run_input=r.input[:PREVIEW_CHARACTERS] if r.input is not None else None,
        content_preview=r.content[:PREVIEW_CHARACTERS] if r.content is not None else None,
        created_at=int(r.created_at),
    )


def agent(a: Agent) -> AgentOut:
    return AgentOut(
        id=a.id,
        name=a.name,
        db_id=DB_ID,
        model=ModelOut(a.model_name, a.model_name, a.model_name, provider(a.model_name) or ""),
        instructions=a.instructions,
        checkpoint=a.checkpoint,
        tools=ToolsOut(
            [
                ToolOut(t.name, t.schema.description, t.schema.parameters, t.requires_confirmation)
                for t in a.tool_map.values()
            ]
        ),
    )


def team(crew: Crew, agents: Mapping[str, Agent]) -> TeamOut:
    return TeamOut(
        **msgspec.structs.asdict(agent(crew)), members=[agent(agents[m]) for m in crew.members]
    )
