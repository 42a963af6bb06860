"""The agents the fault test serves: `runpoint serve --app tests.faults.app:agents`.

Each run's input names a job and cities; the model books each city in its own tool batch.
`book` is a side effect, counted outside the server in the file $FAULTS_COUNTER, one line
per execution, so the test can tell whether any ran twice. `booking-crew` is a team whose
leader gives each run's input to `booker`: its bookings are a member run's."""

from __future__ import annotations

import asyncio
import os

from runpoint.core.types import ToolCall
from runpoint.plugins.scripted import ScriptedModel, call_id
from runpoint.seams.agent import Agent, tool
from runpoint.seams.crew import Crew
from runpoint.seams.model import ModelRequest, ModelResponse


@tool(effect="side-effect")
async def book(job: str, city: str) -> str:
    """Book a city for a job (a side effect)."""
    await asyncio.sleep(0.05)  # a window for the test to kill the server mid-call
    await asyncio.to_thread(count, f"{job} {city}")
    await asyncio.sleep(0.05)
    return booked(job, city)


def count(booking: str) -> None:
    with open(os.environ["FAULTS_COUNTER"], "a") as counter:
        counter.write(booking + "\n")


def booked(job: str, city: str) -> str:
    return f"{city} booked for {job}"


def plan(request: ModelRequest) -> ModelResponse:
    """`job-3: Paris Tokyo Lagos` -> book Paris, then Tokyo, then Lagos, then report."""
    user = next(m.content or "" for m in reversed(request.messages) if m.role == "user")
    job, _, cities = user.partition(":")
    done = {m.tool_args["city"] for m in request.messages if m.role == "tool" and m.tool_args}
    for city in cities.split():
        if city not in done:
            call = ToolCall(call_id(request), "book", {"job": job, "city": city})
            return ModelResponse(content=f"Booking {city}.", tool_calls=[call])
    return ModelResponse(content=f"{job}: all booked.")


agents = [
    Agent(id="booker", model=ScriptedModel(plan, name="scripted:plan"), tools=[book]),
    Crew(id="booking-crew", model="scripted:lead", members=["booker"]),
]
