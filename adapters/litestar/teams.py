"""AgentOS's /teams routes. A team of agents is a crew (`runpoint.seams.crew`), whose runs
are its leader's: each team operation is the agent operation of the same name on the
crew's id, with a team's names on the wire (`team_id`, `team_name`, Team* events) and the
runs of its members nested in each run (`member_responses`, as AgentOS nests them)."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import msgspec
from litestar import Response

from runpoint.core.errors import NotFound
from runpoint.facade import Runpoint
from runpoint.reads import run_trees
from runpoint.seams.crew import Crew

from . import catalog_wire, runs, sse, wire
from .handlers import HANDLERS, Handler, Reply, agent_name, operation

# the agent operations a team has too (AgentOS's team routes)
AGENT_OPERATIONS = (
    runs.create_agent_run,
    runs.list_agent_runs,
    runs.get_agent_run,
    runs.resume_agent_run_stream,
    runs.cancel_agent_run,
    runs.get_agent_run_checkpoint_snapshot,
    runs.fork_agent_session,
)


def crew(rp: Runpoint, team_id: str) -> Crew:
    """The team `team_id`, or NotFound (AgentOS's 404) for an agent or an unknown id."""
    found = rp.agents.get(team_id)
    if not isinstance(found, Crew):
        raise NotFound(f"team {team_id} not found")
    return found


@operation
async def list_teams(rp: Runpoint) -> Reply:
    return [catalog_wire.team(c, rp.agents) for c in rp.agents.values() if isinstance(c, Crew)]


@operation
async def get_team(rp: Runpoint, *, team_id: str) -> Reply:
    return catalog_wire.team(crew(rp, team_id), rp.agents)


def as_team(handler: Handler, name: str | None = None) -> Handler:
    """The team operation of an agent operation (`name`, else the agent operation's with
    `_team_` for `_agent_`): `team_id` for `agent_id`."""

    async def team_operation(rp: Runpoint, *, agent_id: str, **given: Any) -> Reply:
        crew(rp, agent_id)
        return await _team_reply(rp, await handler(rp, agent_id=agent_id, **given))

    team_operation.__signature__ = inspect.signature(handler)  # type: ignore[attr-defined]
    name = name or handler.__name__.replace("_agent_", "_team_")
    return runs.operation_of(team_operation, name, {"team_id": "agent_id"})


for _handler in AGENT_OPERATIONS:
    operation(as_team(_handler))
# with a member's checkpoint to continue from (`member_run_id`)
operation(as_team(runs.continue_run, "continue_team_run"))


async def _team_reply(rp: Runpoint, reply: Reply) -> Reply:
    """An agent operation's reply as its team operation's: a run (or runs) with the team's
    names and its members' runs, events with Team* names; anything else as it is."""
    if isinstance(reply, sse.EventStream):
        return dataclasses.replace(reply, team=True)
    if isinstance(reply, Response):
        # a run's document (kept, see documents.py); a 202's Accepted stays as it is
        if reply.status_code not in (None, 200) or not isinstance(reply.content, bytes):
            return reply
        document = msgspec.json.decode(reply.content)
    elif isinstance(reply, wire.RunOut) or (
        isinstance(reply, list) and all(isinstance(r, wire.RunOut) for r in reply)
    ):
        document = msgspec.json.decode(wire.encode(reply))
    else:
        return reply
    if isinstance(document, list) and all(_is_run(r) for r in document):
        document = [await _team_run(rp, r) for r in document]
    elif _is_run(document):
        document = await _team_run(rp, document)
    else:
        return reply  # a timeline, say
    return Response(wire.encode(document), media_type="application/json")


def _is_run(document: Any) -> bool:
    """Whether a document is a run's (`wire.RunOut`)."""
    return isinstance(document, dict) and {"run_id", "agent_id", "message_count"} <= document.keys()


async def _team_run(rp: Runpoint, run: dict[str, Any]) -> dict[str, Any]:
    # its members' runs, inherited ones (a fork's) included, in the order of its calls
    crew_run = await rp.queries.run(run["run_id"])
    messages = await rp.storage.read_messages(crew_run.segments, crew_run.message_count)
    members = [m.run for m in await run_trees.members(rp.storage, crew_run, messages)]
    nested = [
        msgspec.json.decode(
            wire.encode(
                wire.run_detail(await rp.views.get_run(m.run_id), agent_name(rp, m.agent_id))
            )
        )
        for m in members
    ]
    return run | {
        "team_id": run["agent_id"],
        "team_name": run.get("agent_name"),
        "member_responses": nested,
    }


assert all(name in HANDLERS for name in ("create_team_run", "fork_team_session"))
