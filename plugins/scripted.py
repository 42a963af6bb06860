"""`scripted`: a deterministic offline model, for demos and tests.

A `ScriptedModel` plays either a fixed script of turns or a function of the request (like
pydantic-ai's FunctionModel). The script is indexed by the number of assistant turns since
the last user message, so the same transcript always gets the same answer: a resumed or
forked run replays exactly as the original would have gone on.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence

from runpoint import hookimpl
from runpoint.core.types import Message, ToolCall, Usage
from runpoint.seams.crew import DELEGATE
from runpoint.seams.model import Chunk, Model, ModelProvider, ModelRequest, ModelResponse, TextDelta

TurnFunction = Callable[[ModelRequest], ModelResponse | Awaitable[ModelResponse]]


class ScriptedModel:
    def __init__(
        self,
        script: Sequence[ModelResponse] | TurnFunction,
        *,
        name: str = "scripted",
        latency: float = 0.0,
    ) -> None:
        """`latency`: the seconds each turn waits before it answers, as a vendor's model
        takes time to its first token (0: at once; the turn is then all CPU)."""
        self.script = script
        self._name = name
        self.latency = latency

    @property
    def name(self) -> str:
        return self._name

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        if self.latency:
            await asyncio.sleep(self.latency)
        response = await self._respond(request)
        if response.usage is None:
            response.usage = _usage(request, response)
        for word in (response.content or "").split(" "):
            if word:
                await asyncio.sleep(0)  # let others run between deltas, as a network would
                yield TextDelta(word + " ")
        yield response

    async def _respond(self, request: ModelRequest) -> ModelResponse:
        if callable(self.script):
            result = self.script(request)
            return await result if inspect.isawaitable(result) else result
        turn = turns_since_user(request.messages)
        if turn >= len(self.script):
            raise RuntimeError(f"the script of {self.name} has no turn {turn + 1}")
        return self.script[turn]


def turns_since_user(messages: Sequence[Message]) -> int:
    turns = 0
    for message in reversed(messages):
        if message.role == "user":
            break
        turns += message.role == "assistant"
    return turns


def call_id(request: ModelRequest, i: int = 0) -> str:
    """A tool call id that is unique within the transcript the request carries."""
    return f"call_{len(request.messages)}_{i}"


def _usage(request: ModelRequest, response: ModelResponse) -> Usage:
    # a deterministic stand-in: about four characters a token
    seen = sum(len(m.content or "") for m in request.messages)
    return Usage(input_tokens=1 + seen // 4, output_tokens=1 + len(response.content or "") // 4)


# -- the demo model ---------------------------------------------------------------

CITIES = ("Paris", "Tokyo", "Lagos", "Kyoto", "London", "Cairo", "Lima", "Sydney")


def demo_turn(request: ModelRequest) -> ModelResponse:
    """Look up each city the user names with the first tool that takes a `city`, one
    tool batch per city, then answer with what the tools said."""
    user = next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "")
    since_user = request.messages[len(request.messages) - _tail_length(request.messages) :]
    asked = {c.arguments.get("city") for m in since_user for c in m.tool_calls or ()}
    tool = next(
        (t.name for t in request.tools if "city" in t.parameters.get("properties", {})), None
    )
    cities = [c for c in CITIES if c.lower() in user.lower()]
    remaining = [c for c in cities if c not in asked]
    if tool and remaining:
        return ModelResponse(
            content=f"Looking up {remaining[0]}.",
            tool_calls=[ToolCall(call_id(request), tool, {"city": remaining[0]})],
        )
    results = [
        f"{m.tool_args.get('city')}: {m.content}"
        for m in since_user
        if m.role == "tool" and m.tool_args
    ]
    if results:
        return ModelResponse(content="Here is what I found. " + "; ".join(results) + ".")
    return ModelResponse(content=f"You said: {user}")


def _tail_length(messages: Sequence[Message]) -> int:
    for i, message in enumerate(reversed(messages)):
        if message.role == "user":
            return i
    return len(messages)


def lead_turn(request: ModelRequest) -> ModelResponse:
    """A team's leader: give the user's message to every member at once (one delegation
    call each, in one turn), then answer with what they said."""
    user = next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "")
    since_user = request.messages[len(request.messages) - _tail_length(request.messages) :]
    if answers := [m for m in since_user if m.role == "tool" and m.tool_args]:
        said = "; ".join(f"{(m.tool_args or {}).get('member_id')}: {m.content}" for m in answers)
        return ModelResponse(content=f"The team says: {said}")
    delegation = next((t for t in request.tools if t.name == DELEGATE), None)
    members = delegation.parameters["properties"]["member_id"]["enum"] if delegation else []
    if not members:
        return echo_turn(request)
    return ModelResponse(
        content="Asking the team.",
        tool_calls=[
            ToolCall(call_id(request, i), DELEGATE, {"member_id": member, "task": user})
            for i, member in enumerate(members)
        ],
    )


def echo_turn(request: ModelRequest) -> ModelResponse:
    user = next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "")
    return ModelResponse(content=user)


@hookimpl
def runpoint_model_providers() -> Mapping[str, ModelProvider]:
    functions: dict[str, TurnFunction] = {
        "demo": demo_turn,
        "echo": echo_turn,
        "lead": lead_turn,
    }

    def provider(name: str) -> Model:
        if name not in functions:
            raise ValueError(f"no scripted model {name!r} (known: {sorted(functions)})")
        return ScriptedModel(functions[name], name=f"scripted:{name}")

    return {"scripted": provider}
