"""The handlers of openapi.yaml's operations, one function per operationId, each registered
with `@operation` (this module has the server's own: health, readiness, metrics, config and
agents; runs.py, branches.py, sessions.py, session_checkpoints.py and reference.py the
rest); the app routes each operation to the function of that name.

A handler takes the app's `Runpoint`, then by name the operation's validated inputs (path
and query parameters and body fields) and whatever of the app's own state it names (see
`app.build`: `documents`, the run documents it keeps; `openapi_json`, the document it
serves). It returns a wire struct, a list of them, a ready Response, a run's events
(`sse.EventStream`), or None for an empty body."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec
from litestar import Response

from runpoint.adapters.metrics import Metrics
from runpoint.core.errors import NotFound
from runpoint.facade import Runpoint
from runpoint.seams.crew import Crew

from . import catalog_wire, sse, wire
from .errors import HttpError

Reply = msgspec.Struct | Sequence[msgspec.Struct] | Response[Any] | sse.EventStream | None
Handler = Callable[..., Awaitable[Reply]]
HANDLERS: dict[str, Handler] = {}  # by operationId


def operation(handler: Handler) -> Handler:
    """Register `handler` as the handler of the operation its name is."""
    HANDLERS[handler.__name__] = handler
    return handler


class Health(msgspec.Struct):
    status: str = "ok"


@operation
async def health(rp: Runpoint) -> Reply:
    return Health()


class Ready(msgspec.Struct):
    status: str
    checks: dict[str, str]


@operation
async def ready(rp: Runpoint) -> Reply:
    checks = await rp.readiness()
    if all(outcome == "ok" for outcome in checks.values()):
        return Ready("ready", checks)
    body = wire.encode(Ready("unready", checks))
    return Response(body, status_code=503, media_type="application/json")


@operation
async def get_metrics(rp: Runpoint) -> Reply:
    if (metrics := rp.host.find(Metrics)) is None:
        raise HttpError(
            501,
            "METRICS_UNAVAILABLE",
            "this server keeps no metrics: they need prometheus_client "
            "(pip install 'runpoint[otel]')",
        )
    body, media_type = await metrics.scrape(rp)
    return Response(body, headers={"Content-Type": media_type})


def agent_name(rp: Runpoint, agent_id: str) -> str | None:
    """The agent's display name, if this server has the agent."""
    agent = rp.agents.get(agent_id)
    return agent.name if agent else None


def agent_names(rp: Runpoint) -> dict[str, str]:
    """The display names of this server's agents (and teams) that have one, by id."""
    return {a.id: a.name for a in rp.agents.values() if a.name is not None}


@operation
async def get_config(rp: Runpoint) -> Reply:
    agents = [catalog_wire.agent(a) for a in rp.agents.values() if not isinstance(a, Crew)]
    teams = [catalog_wire.team(c, rp.agents) for c in rp.agents.values() if isinstance(c, Crew)]
    return catalog_wire.ConfigOut("runpoint", "runpoint", agents, teams=teams)


@operation
async def list_agents(rp: Runpoint) -> Reply:
    return [catalog_wire.agent(a) for a in rp.agents.values() if not isinstance(a, Crew)]


@operation
async def get_agent(rp: Runpoint, *, agent_id: str) -> Reply:
    return catalog_wire.agent(rp.agent(agent_id))


def refuse_team(rp: Runpoint, agent_id: str) -> None:
    """AgentOS's 404 for a team's id under /agents/{agent_id} (a team is served under
    /teams, whose operations call the agent handlers with it)."""
    if isinstance(rp.agents.get(agent_id), Crew):
        raise NotFound(f"agent {agent_id} not found")
