"""Caps on what one request may ask for: the messages of a run input or a chat completion."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from juru.core.errors import InvalidRequestError
from juru.settings import Settings


def characters_in(value: Any) -> int:
    """The characters of every string in a message (its content, parts, tool-call arguments)."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
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
    characters = characters_in(list(messages))
    if characters > settings.max_input_characters:
        raise InvalidRequestError(
            f"{field}: {characters} characters; at most {settings.max_input_characters} are "
            "accepted (JURU_MAX_INPUT_CHARACTERS)",
            "input_too_large",
        )
