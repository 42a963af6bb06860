"""The demo agents and team `runpoint serve` runs by default, on the offline `scripted`
models."""

from runpoint.seams.agent import Agent, tool
from runpoint.seams.crew import Crew

POPULATIONS = {"Paris": "2.1M", "Tokyo": "13.9M", "Lagos": "15.3M", "Kyoto": "1.5M"}
FACTS = {
    "Kyoto": "Kyoto was Japan's imperial capital for more than one thousand years.",
    "Paris": "Paris is divided into 20 administrative arrondissements.",
}


@tool(effect="read")
def get_population(city: str) -> str:
    """Look up the population of a city.

    Args:
        city: The city's name, such as "Paris".
    """
    return POPULATIONS.get(city, "unknown")


@tool(effect="read")
def get_city_fact(city: str) -> str:
    """Return a deterministic fact for a supported city.

    Args:
        city: The city's name, such as "Kyoto".
    """
    return FACTS.get(city, f"No stored fact is available for {city}.")


@tool(requires_confirmation=True)
def book_trip(city: str) -> str:
    """Book a trip to a city (asks a person first).

    Args:
        city: Where to go.
    """
    return f"Booked a trip to {city}."


# what record_visit did, in this process (its side effect)
VISITS: list[str] = []


@tool
def record_visit(city: str) -> str:
    """Write a city down in the traveller's plan (a side effect: it runs once).

    Args:
        city: The city to plan a visit to.
    """
    VISITS.append(city)
    return f"{city} is in the plan."


agents = [
    Agent(
        id="travel-agent",
        name="Travel Agent",
        model="scripted:demo",
        instructions="Use get_population for each city before answering.",
        tools=[get_population],
    ),
    Agent(
        id="checkpoint-agent",
        name="Checkpoint Agent",
        model="scripted:demo",
        instructions="Use get_city_fact for city facts before answering.",
        tools=[get_city_fact],
    ),
    Agent(
        id="booking-agent",
        name="Booking Agent",
        model="scripted:demo",
        instructions="Book trips only with the traveller's approval.",
        tools=[book_trip],
    ),
    Agent(
        id="planner-agent",
        name="Planner Agent",
        model="scripted:demo",
        instructions="Write each city down in the plan with record_visit.",
        tools=[record_visit],
    ),
    Crew(
        id="travel-team",
        name="Travel Team",
        model="scripted:lead",
        instructions="Give the traveller's question to the members who can answer it.",
        members=["travel-agent", "planner-agent"],
    ),
]
