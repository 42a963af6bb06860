"""Agents for `runpoint serve --app tests.console.booking_team:agents`: the demo's, and
`booking-team`, whose one member books trips only with a person's approval, so that its
team run pauses for a person's decision."""

from runpoint.plugins import demo
from runpoint.seams.crew import Crew

agents = [
    *demo.agents,
    Crew(
        id="booking-team",
        name="Booking Team",
        model="scripted:lead",
        instructions="Give the traveller's bookings to the booking agent.",
        members=["booking-agent"],
    ),
]
