"""The demo agents `runpoint serve` runs by default, on the offline `scripted:demo` model."""

from runpoint.seams.agent import Agent, tool

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
]
