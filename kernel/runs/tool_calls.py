"""One call of a tool batch: whether a person must decide it, whether its side effects are
recorded, whether it runs, and running it (a failure is an error result the model sees, not
a failed run)."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import msgspec

from runpoint.core.errors import InvalidArguments, InvalidRequest, Unavailable
from runpoint.core.types import Approve, Decision, Reject, Ruling, ToolCall
from runpoint.seams.agent import Agent
from runpoint.seams.crew import MembersPaused
from runpoint.seams.model import MAX_TOOL_CALL_ID_LENGTH

REJECTED = "The user rejected this tool call."
SKIPPED = "A person chose not to run this call again: it may have run before its process died."


def check_ids(model: str, calls: Sequence[ToolCall], earlier: Collection[str]) -> None:
    """Refuse a model's turn whose call ids cannot be kept: an id keys stored records (the
    call's, a person's decision on it), and a vendor matches results to calls by id, so
    each is unique in its run (`earlier`: the ids of the run's calls so far)."""
    if too_long := [c.id for c in calls if len(c.id) > MAX_TOOL_CALL_ID_LENGTH]:
        raise ValueError(
            f"model {model} named a tool call with an id of {len(too_long[0])} "
            f"characters (at most {MAX_TOOL_CALL_ID_LENGTH})"
        )
    if any("\x00" in c.id for c in calls):
        raise ValueError(f"model {model} named a tool call whose id has a U+0000 (NUL)")
    seen = set(earlier)
    for call in calls:
        if call.id in seen:
            raise ValueError(
                f"model {model} named a second tool call with the id {call.id!r} "
                "(a call's id must be unique in its run)"
            )
        seen.add(call.id)


def is_recorded(agent: Agent, call: ToolCall) -> bool:
    """Whether this call's side effects are recorded (it may not run twice)."""
    tool = agent.tool_map.get(call.name)
    return tool is not None and tool.effect == "side-effect"


def undecided(
    agent: Agent, calls: Sequence[ToolCall], decisions: Mapping[str, Decision]
) -> list[ToolCall]:
    """The calls that wait for a person's confirmation."""
    tools = agent.tool_map
    return [
        c
        for c in calls
        if c.name in tools and tools[c.name].requires_confirmation and c.id not in decisions
    ]


def checked(
    agent: Agent, pending: list[ToolCall], decisions: Mapping[str, Decision]
) -> dict[str, Decision]:
    """A person's decisions on the paused calls `pending`, each checked: it names one of
    them, and edited arguments fit the tool's schema (an edit that changes nothing is a
    plain approval, so the transcript says what really happened)."""
    calls = {c.id: c for c in pending}
    if unknown := set(decisions) - set(calls):
        raise InvalidRequest(f"no paused tool call has the id(s) {sorted(unknown)}")
    checked: dict[str, Decision] = {}
    for call_id, decision in decisions.items():
        call = calls[call_id]
        if isinstance(decision, Approve) and decision.arguments == call.arguments:
            decision = True
        elif isinstance(decision, Approve):
            check_arguments(agent, call, decision.arguments)
        checked[call_id] = decision
    return checked


def approved(decision: Decision | None) -> bool:
    """Whether a person decided to run the call (as proposed, or with edited arguments)."""
    return decision is True or isinstance(decision, Approve)


def ruling(decision: Decision | None) -> Ruling | None:
    """What a person's decision was, as the call's result records it."""
    if decision is None:
        return None
    if isinstance(decision, str):
        return "answered"
    if isinstance(decision, Approve):
        return "edited"
    return "approved" if decision is True else "rejected"


def arguments(call: ToolCall, decision: Decision | None) -> dict[str, Any]:
    """The arguments the call runs with: a person's edit, else the model's."""
    return decision.arguments if isinstance(decision, Approve) else call.arguments


def check_arguments(agent: Agent, call: ToolCall, edited: dict[str, Any]) -> None:
    """Refuse arguments a person wrote for `call` that its tool's schema refuses
    (InvalidArguments, naming the field), before anything is accepted."""
    tool = agent.tool_map.get(call.name)
    if tool is None:
        raise InvalidRequest(f"tool call {call.id} names no tool of this agent ({call.name!r})")
    try:
        msgspec.convert(edited, tool.arguments, strict=False)
    except msgspec.ValidationError as exc:
        raise InvalidArguments(
            f"the arguments for tool call {call.id} do not fit {call.name}'s schema: "
            f"{_field_named(exc)}"
        ) from None


def _field_named(exc: msgspec.ValidationError) -> str:
    """msgspec's complaint with its field first: `arguments.city: Expected ...`."""
    message, _, where = str(exc).partition(" - at `$")
    field = "arguments" + where.rstrip("`")
    if missing := re.fullmatch(r"Object missing required field `(.+)`", message):
        return f"{field}.{missing[1]} is required"
    if unknown := re.fullmatch(r"Object contains unknown field `(.+)`", message):
        return f"{field}.{unknown[1]} is not a parameter of the tool"
    return f"{field}: {message}"


def refusal(
    agent: Agent, call: ToolCall, decision: Decision | None, *, in_doubt: bool
) -> str | None:
    """Why this call is not run (its error result), or None if it runs."""
    tool = agent.tool_map.get(call.name)
    if tool is None:
        return f"Unknown tool {call.name!r}."
    if isinstance(decision, Reject):
        return f"{REJECTED} The reason given: {decision.reason}"
    if tool.requires_confirmation and not approved(decision):
        return REJECTED
    if in_doubt and not approved(decision):
        return SKIPPED
    if decision is False:
        return REJECTED
    return None


async def run(agent: Agent, call: ToolCall, decision: Decision | None) -> tuple[str, bool]:
    """Run a call of one of the agent's tools with the arguments a person decided (the
    model's, or their edit): its result and whether it failed."""
    try:
        return await agent.tool_map[call.name](arguments(call, decision)), False
    except (MembersPaused, Unavailable):  # not the call's failure: its crew run pauses, or
        raise  # its database is away (a delegation's member run stopped with it)
    except msgspec.ValidationError as exc:
        return f"Invalid arguments for {call.name}: {exc}", True
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}", True


def info(call: ToolCall, decision: Decision | None = None) -> dict[str, Any]:
    """A call as events describe it (with the arguments it runs with)."""
    return {
        "tool_call_id": call.id,
        "tool_name": call.name,
        "tool_args": arguments(call, decision),
    }
