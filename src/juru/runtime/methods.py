"""The class-method table: every method the endpoints answer, its api_mode, input and handler.

The `classMethods` list of a deployment spec is generated from this table
(`juru runtime class-methods`), so it cannot drift from what the server accepts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from juru.runtime.errors import RuntimeCallError, RuntimeInputError
from juru.runtime.inputs import (
    AdkQueryInput,
    CreateSessionInput,
    MethodInput,
    QueryInput,
    SessionInput,
    UserInput,
    parse_input,
)
from juru.runtime.service import RuntimeService

logger = logging.getLogger(__name__)
UNARY_MODES = frozenset({"", "async"})
STREAM_MODES = frozenset({"stream", "async_stream"})
UNARY_PATH = "/api/reasoning_engine"
STREAM_PATH = "/api/stream_reasoning_engine"

UnaryHandler = Callable[[RuntimeService, Any], Awaitable[Any]]
Chunks = AsyncGenerator[dict[str, Any], None]
StreamHandler = Callable[[RuntimeService, Any], Chunks]


@dataclass(frozen=True)
class ClassMethod:
    """One class method: a unary handler (api_mode "" or "async") or a stream handler."""

    name: str
    api_mode: str
    input_model: type[MethodInput]
    description: str
    unary: UnaryHandler | None = None
    stream: StreamHandler | None = None

    @property
    def streams(self) -> bool:
        return self.api_mode in STREAM_MODES

    @property
    def path(self) -> str:
        return STREAM_PATH if self.streams else UNARY_PATH

    def spec(self) -> dict[str, Any]:
        """The method's entry in a deployment spec's `classMethods`."""
        return {
            "name": self.name,
            "api_mode": self.api_mode,
            "description": self.description,
            "parameters": self.input_model.model_json_schema(),
        }


def _session_methods(
    name: str, input_model: type[MethodInput], unary: UnaryHandler, description: str
) -> list[ClassMethod]:
    """ADK's pair of session methods: `async_<name>` (api_mode "async") and plain `<name>`."""
    return [
        ClassMethod(f"async_{name}", "async", input_model, description, unary=unary),
        ClassMethod(name, "", input_model, description, unary=unary),
    ]


CLASS_METHODS: tuple[ClassMethod, ...] = (
    ClassMethod(
        "query",
        "",
        QueryInput,
        "Send one message to the agent and get its final answer.",
        unary=RuntimeService.query,
    ),
    ClassMethod(
        "stream_query",
        "stream",
        QueryInput,
        "Send one message and stream the text of the agent's answer as {'output': chunk} lines.",
        stream=RuntimeService.stream_query,
    ),
    ClassMethod(
        "async_stream_query",
        "async_stream",
        AdkQueryInput,
        "Send one message in a session and stream ADK events (text, function calls and "
        "function responses).",
        stream=RuntimeService.async_stream_query,
    ),
    *_session_methods(
        "create_session",
        CreateSessionInput,
        RuntimeService.create_session,
        "Create a session (a Juru thread) for a user.",
    ),
    *_session_methods(
        "get_session",
        SessionInput,
        RuntimeService.get_session,
        "Get a user's session with its events.",
    ),
    *_session_methods(
        "list_sessions",
        UserInput,
        RuntimeService.list_sessions,
        "List a user's sessions (without their events).",
    ),
    *_session_methods(
        "delete_session",
        SessionInput,
        RuntimeService.delete_session,
        "Delete a user's session and its conversation.",
    ),
)
METHODS_BY_NAME = {method.name: method for method in CLASS_METHODS}


def class_methods_spec() -> list[dict[str, Any]]:
    """The `classMethods` of a deployment spec: every method the endpoints accept."""
    return [method.spec() for method in CLASS_METHODS]


def class_methods_json() -> str:
    """`class_methods_spec()` as the committed file holds it (docs/agent-engine/)."""
    return json.dumps(class_methods_spec(), indent=2) + "\n"


def find_method(name: str, streaming_endpoint: bool) -> ClassMethod:
    """The method `name` as the endpoint (unary or streaming) serves it; 400 otherwise."""
    method = METHODS_BY_NAME.get(name)
    if method is None:
        known = ", ".join(METHODS_BY_NAME)
        raise RuntimeInputError(f"unknown class_method {name!r}; this agent has: {known}")
    if method.streams != streaming_endpoint:
        raise RuntimeInputError(
            f"class_method {name!r} has api_mode {method.api_mode!r}: call {method.path}"
        )
    return method


async def call_unary(service: RuntimeService, name: str, raw: dict[str, Any] | None) -> Any:
    """Run a unary class method and return its output."""
    method = find_method(name, streaming_endpoint=False)
    assert method.unary is not None
    data = parse_input(method.input_model, raw)
    with _as_call_error(name):
        return await method.unary(service, data)


async def open_stream(service: RuntimeService, name: str, raw: dict[str, Any] | None) -> Chunks:
    """Start a streaming class method: every failure before its first chunk raises here (so it
    can still be answered with an error status); the chunks come from the returned iterator."""
    method = find_method(name, streaming_endpoint=True)
    assert method.stream is not None
    chunks = method.stream(service, parse_input(method.input_model, raw))
    try:
        with _as_call_error(name):
            first = await anext(chunks)
    except StopAsyncIteration:
        return _empty()
    except BaseException:
        with contextlib.suppress(Exception):
            await chunks.aclose()
        raise
    return _chained(first, chunks)


@contextlib.contextmanager
def _as_call_error(name: str) -> Iterator[None]:
    """An unexpected failure (a database error, say) still answers `{"error": ...}`."""
    try:
        yield
    except (RuntimeCallError, StopAsyncIteration):
        raise
    except Exception as error:
        # The answer is public: the details (SQL, say) go to the log under a reference.
        reference = uuid.uuid4().hex[:12]
        logger.exception("class method %s failed (ref %s)", name, reference)
        raise RuntimeCallError(
            f"{name} failed: internal error (ref {reference}); the server log has the details"
        ) from error


async def _empty() -> Chunks:
    return
    yield


async def _chained(first: dict[str, Any], rest: Chunks) -> Chunks:
    try:
        yield first
        async for chunk in rest:
            yield chunk
    finally:
        await rest.aclose()
