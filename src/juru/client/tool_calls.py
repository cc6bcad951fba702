"""Running a run's pending tool calls with the caller's Python functions (`run_until_done`,
and `juru chat --tools`)."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from juru.client.errors import UnknownToolError
from juru.client.models import ToolCall

ToolFunction = Callable[..., Any]


def check_known(calls: Sequence[ToolCall], tools: Mapping[str, ToolFunction], run_id: str) -> None:
    """Raise before any output is sent when a call names a tool there is no function for."""
    unknown = sorted({call.name for call in calls if call.name not in tools})
    if unknown:
        raise UnknownToolError(unknown, sorted(tools), run_id)


def arguments_of(call: ToolCall) -> Any:
    """The call's arguments: the JSON the model wrote, parsed (an empty string is `{}`)."""
    return json.loads(call.arguments) if call.arguments.strip() else {}


def invoke(function: ToolFunction, arguments: Any) -> Any:
    """`function(**arguments)` for an object of arguments, else `function(arguments)`."""
    return function(**arguments) if isinstance(arguments, dict) else function(arguments)


def output_text(result: Any) -> str:
    """What goes back to the model: a string as it is, anything else as JSON."""
    return result if isinstance(result, str) else json.dumps(result, default=str)


def error_text(error: BaseException) -> str:
    """A tool that raised: the model is told which error, and can react to it."""
    return json.dumps({"error": f"{type(error).__name__}: {error}"})


def output(call: ToolCall, text: str) -> dict[str, str]:
    return {"tool_call_id": call.id, "output": text}


def run_blocking(function: ToolFunction, call: ToolCall) -> tuple[str, bool]:
    """The output text of `function` for `call` (a coroutine it returns is run to its end), and
    whether it raised (then the error is the output)."""
    try:
        result = invoke(function, arguments_of(call))
        if inspect.isawaitable(result):
            result = asyncio.run(_awaited(result))
        return output_text(result), False
    except Exception as error:  # the model is told, and can react
        return error_text(error), True


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
