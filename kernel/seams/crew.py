"""Crews: Agno's teams of agents, served under /teams. In runpoint "team" names the tenant
(`runpoint.core.tenancy`), so a team of agents is a *crew* inside the code: a leader agent
(its model, instructions and checkpoint policy) that delegates tasks to member agents
through a tool the framework gives it. Each delegation is a run of its member (a child run
of the crew run; see `runpoint.runs.crews`)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import msgspec

from runpoint.seams.agent import Agent, tool

DELEGATE = "delegate_task_to_member"
_MEMBERS = uuid.UUID("5f0c3f2e-2f6b-4b8e-9d55-6b1f0c7a9e31")


def member_run_id(crew_run_id: str, tool_call_id: str) -> str:
    """The id of the member run a crew run's delegation call starts: the same each time
    the call runs (resumed, the delegation finds its run), and made from the crew run's
    for a copy of one (a session fork's, a continue from a member's checkpoint)."""
    return str(uuid.uuid5(_MEMBERS, f"{crew_run_id}/{tool_call_id}"))


# what a delegation call does, given by the execution that runs the call: (member, task)
# to the member's answer
Delegate = Callable[[str, str], Awaitable[str]]
delegating: ContextVar[Delegate] = ContextVar("delegating")


class MembersPaused(Exception):
    """Members' runs paused for a person: their crew run pauses with them. `tools` are
    their calls that wait, as events describe them (with the member and its run)."""

    def __init__(self, tools: Sequence[dict[str, Any]]) -> None:
        super().__init__(f"{len(tools)} member tool call(s) wait for a person")
        self.tools = list(tools)


async def delegate_task_to_member(member_id: str, task: str) -> str:
    """Give a task to one member of the team and return its answer. To give tasks to
    several members at once, call this once for each member in the same turn.

    Args:
        member_id: The id of the member to give the task to.
        task: The task, with everything the member needs to know to do it.
    """
    return await delegating.get()(member_id, task)


@dataclass
class Crew(Agent):
    """A team of agents: the leader is this agent (its `model`, `instructions`, own
    `tools`...); `members` are the ids of the app's agents it may delegate to."""

    members: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.members:
            raise ValueError(f"team {self.id!r} has no members")
        if twice := sorted({m for m in self.members if self.members.count(m) > 1}):
            raise ValueError(f"team {self.id!r} names member {twice[0]!r} twice")
        # idempotent: run again after a crash, a delegation finds its member's run
        delegation = tool(effect="idempotent")(delegate_task_to_member)
        parameters = dict(delegation.schema.parameters)
        properties = dict(parameters["properties"])
        properties["member_id"] = properties["member_id"] | {"enum": list(self.members)}
        parameters["properties"] = properties
        schema = msgspec.structs.replace(delegation.schema, parameters=parameters)
        # a copy (`dataclasses.replace`) is made with the tools of its original
        own = [t for t in self.tools if getattr(t, "name", None) != DELEGATE]
        self.tools = [*own, dataclasses.replace(delegation, schema=schema)]
        super().__post_init__()


def check_crews(agents: Iterable[Agent]) -> None:
    """Refuse, in one line, an app whose ids collide or whose crew names a member that is
    not one of its agents (or is a crew)."""
    seen: set[str] = set()
    for agent in agents:
        if agent.id in seen:
            kind = "team" if isinstance(agent, Crew) else "agent"
            raise ValueError(f"{kind} id {agent.id!r} is taken by another agent or team")
        seen.add(agent.id)
    plain = {a.id for a in agents if not isinstance(a, Crew)}
    for crew in agents:
        if isinstance(crew, Crew) and (unknown := [m for m in crew.members if m not in plain]):
            raise ValueError(f"team {crew.id!r}: member {unknown[0]!r} is not an agent of the app")
