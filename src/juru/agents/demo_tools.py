"""The tools of the built-in features: canned weather and a pretend e-mail outbox.

They are demonstration tools: the weather is made up (deterministically, per place) and no
e-mail leaves the machine.
"""

from __future__ import annotations

import hashlib

from langchain_core.tools import BaseTool, tool

_KNOWN_PLACES = {
    "sf": "San Francisco",
    "san francisco": "San Francisco",
    "nyc": "New York",
    "jkt": "Jakarta",
}
_CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "foggy", "stormy")


def weather_report(location: str) -> str:
    """A made-up but stable weather report for `location`."""
    place = _KNOWN_PLACES.get(location.strip().lower(), location.strip() or "that place")
    digest = hashlib.sha256(place.lower().encode()).digest()
    condition = _CONDITIONS[digest[0] % len(_CONDITIONS)]
    temperature = 12 + digest[1] % 22
    return f"It's {condition} in {place}, {temperature}°C (demo weather data)."


@tool
def get_weather(location: str) -> str:
    """Get the current weather for a city or place."""
    return weather_report(location)


@tool
def send_email(to: str, subject: str, body: str) -> str:
    """Send an e-mail message to a recipient."""
    return f"E-mail to {to} with subject {subject!r} queued in the demo outbox (not delivered)."


WEATHER_TOOLS: tuple[BaseTool, ...] = (get_weather,)
EMAIL_TOOLS: tuple[BaseTool, ...] = (send_email,)
