"""Local tool handlers for `juru chat --tools tests.support.terminal_tools:TOOLS`."""

from __future__ import annotations


def get_weather(city: str) -> str:
    return f"{city}: 30°C, cerah (from the test handler)"


TOOLS = {"get_weather": get_weather}
