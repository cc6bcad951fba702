"""Caps on what one request may ask for: the messages of a run input or a chat completion."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from juru.core.errors import InvalidRequestError
from juru.settings import Settings

# The parts of a message that are text: what it says and the calls it makes.
TEXT_FIELDS = ("content", "tool_calls")
# Labels inside those parts, not text.
LABEL_KEYS = frozenset({"type", "id"})


def characters_in(messages: Sequence[Any]) -> int:
    """The characters of the text of the messages: every string in their content (parts
    included) and tool calls, but not roles, ids or part types."""
    total = 0
    stack: list[Any] = []
    for message in messages:
        if isinstance(message, dict):
            stack.extend(message.get(field) for field in TEXT_FIELDS)
        else:
            stack.append(message)
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(value for key, value in item.items() if key not in LABEL_KEYS)
        elif isinstance(item, list):
            stack.extend(item)
    return total


def check_input_size(messages: Sequence[Any], settings: Settings, field: str) -> None:
    """400 `input_too_large` naming the cap (`JURU_MAX_INPUT_MESSAGES`, `..._CHARACTERS`)."""
    if len(messages) > settings.max_input_messages:
        raise InvalidRequestError(
            f"{field}: {len(messages)} messages; at most {settings.max_input_messages} are "
            "accepted (JURU_MAX_INPUT_MESSAGES)",
            "input_too_large",
        )
    characters = characters_in(messages)
    if characters > settings.max_input_characters:
        raise InvalidRequestError(
            f"{field}: {characters} characters; at most {settings.max_input_characters} are "
            "accepted (JURU_MAX_INPUT_CHARACTERS)",
            "input_too_large",
        )
