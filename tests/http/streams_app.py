"""The agents the stream tests serve: `runpoint serve --app tests.http.streams_app:agents`.

As the fault test's (tests/faults/app.py), a run books each city of its input in a tool
batch of its own, but its tool has no side effect: a run whose server dies is resumed by
another process without waiting for a person's decision. `booking-crew` is a team whose
leader gives each run's input to `booker`."""

from __future__ import annotations

import asyncio

from runpoint.plugins.scripted import ScriptedModel
from runpoint.seams.agent import Agent, tool
from runpoint.seams.crew import Crew
from tests.faults.app import booked, plan


@tool(effect="read")
async def book(job: str, city: str) -> str:
    """Book a city for a job (a tenth of a second: a window to drop a stream, or a server)."""
    await asyncio.sleep(0.1)
    return booked(job, city)


agents = [
    Agent(id="booker", model=ScriptedModel(plan, name="scripted:plan"), tools=[book]),
    Crew(id="booking-crew", model="scripted:lead", members=["booker"]),
]
