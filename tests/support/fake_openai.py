"""A scripted, OpenAI-compatible chat-completions server for tests and benchmarks.

The real ``openai`` and ``langchain_openai`` client code talks to it over a socket, so
tests exercise HTTP, SSE parsing, retries and tool-call plumbing exactly as in production.

Endpoints
---------
``POST /v1/chat/completions``
    OpenAI-compatible (``model``, ``messages``, ``tools``, ``tool_choice``, ``temperature``,
    ``max_tokens``/``max_completion_tokens``, ``stream``, ``stream_options``). Needs an
    ``Authorization: Bearer <anything>`` header, else 401 with an OpenAI error body. Bodies
    that the real API would reject (no ``model``, no ``messages``, a ``tool`` message that
    answers no earlier tool call, an unanswered tool call, ``stream_options`` without
    ``stream``) get a 400. ``tools``, ``tool_choice``, ``temperature`` and the token limits are
    recorded and counted but never change the reply.
``GET /v1/models``
    Lists :data:`MODEL_IDS` (also needs the bearer header).
``POST /_control/script``
    Body ``{"replies": [...], "latency": 0.5}`` (latency optional): replaces the script.
``POST /_control/reset``
    Clears the script and the recorded requests, and sets the latency back to 0.
``POST /_control/open``
    Body ``{"gate": "name"}``: lets streams held at that gate go on (see ``hold``).
``GET /_control/requests``
    A JSON array of the recorded chat-completion request bodies, oldest first.

Script
------
Replies are served first in, first out. Each reply is a dict with these keys, all optional:

* ``"content": "text"``: the assistant's text.
* ``"tool_calls": [{"name": "get_weather", "arguments": {"city": "Jakarta"}}]``: one or more
  calls. ``arguments`` is a dict (sent as compact JSON) or a string (sent verbatim, to
  simulate malformed arguments); an optional ``"id"`` overrides the generated ``call_<hex>``.
* ``"delay": seconds``: wait (asyncio) before answering, on top of the state's latency.
* ``"chunk_delay": seconds``: pause between streamed chunks.
* ``"error": {"status": 500, "message": "...", "type": ..., "code": ..., "headers": {...}}``:
  answer with that HTTP error in OpenAI's format instead (only ``status`` is required).
  The ``openai`` client retries 408/409/429/5xx by default, and each retry consumes a
  reply: build clients with ``max_retries=0`` or make the error ``repeat``.
* ``"repeat": true``: the reply is never consumed, so the model answers the same way
  forever (a runaway agent).
* ``"hold": "name"``: a streamed answer stops after its first content piece and waits until
  the gate ``name`` is opened (``open_gate``, or ``POST /_control/open {"gate": "name"}``);
  ``is_held(name)`` says whether a stream is waiting there. A gate left closed lets the
  stream go on after :data:`HOLD_LIMIT_SECONDS`, so a forgotten gate never hangs a test.

A reply with neither ``content`` nor ``tool_calls``, or any request once the script is
empty, gets the deterministic answer ``"fake answer: <text of the last user message>"``.

Token usage
-----------
Deterministic; ``len`` counts characters and the text of a message is its content (string,
or the ``text`` of its content parts) followed by ``name + arguments`` of each tool call:

* ``prompt_tokens = sum(len(text(m)) // 4 + 1 for m in messages)``, plus
  ``len(compact_sorted_json(tools)) // 4`` when ``tools`` is present;
* ``completion_tokens = len(content + "".join(name + arguments for each call)) // 4 + 1``;
* ``total_tokens = prompt_tokens + completion_tokens``.

In process
----------
``FakeOpenAIServer`` runs the app with uvicorn in a background thread on a free port::

    with FakeOpenAIServer() as server:
        server.script([{"content": "hello"}])
        client = openai.OpenAI(base_url=server.base_url, api_key="test")

As a process
------------
``python -m tests.support.fake_openai --port 0`` (run from the repository root) prints one
line ``LISTENING http://127.0.0.1:PORT/v1`` to stdout once it accepts connections, then
serves until SIGTERM or SIGINT (exit status 0). Script it through the ``/_control``
endpoints on the same host and port. Options: ``--host``, ``--port``, ``--latency``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import re
import signal
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any, Self

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

JSON = dict[str, Any]
Endpoint = Callable[[Request], Awaitable[Response]]

MODEL_IDS: tuple[str, ...] = ("gpt-4o-mini", "gpt-4o")
DEFAULT_ANSWER_PREFIX = "fake answer: "

_REPLY_KEYS = frozenset(
    {"content", "tool_calls", "delay", "chunk_delay", "error", "repeat", "hold"}
)
HOLD_LIMIT_SECONDS = 60.0
_TOOL_CALL_KEYS = frozenset({"name", "arguments", "id"})
_ERROR_KEYS = frozenset({"status", "message", "type", "code", "headers"})
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_error",
}
_WORD_PIECES = re.compile(r"\s*\S+\s*")
_ARGUMENT_PIECE_SIZE = 8
_STARTUP_POLL_SECONDS = 0.01


# --------------------------------------------------------------------------- script


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call the fake model makes; ``arguments`` is the JSON text sent."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True)
class ScriptedError:
    """An HTTP error the fake model answers with."""

    status: int
    message: str
    type: str
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Reply:
    """One parsed script entry (see the module docstring for the dict form)."""

    content: str | None = None
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    delay: float = 0.0
    chunk_delay: float = 0.0
    error: ScriptedError | None = None
    repeat: bool = False
    hold: str | None = None


def parse_reply(raw: Mapping[str, Any]) -> Reply:
    """Validate one script entry and turn it into a :class:`Reply` (``ValueError`` if bad)."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"a reply must be a dict, got {raw!r}")
    _reject_unknown_keys(raw, _REPLY_KEYS, "reply")
    content = raw.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError(f"reply content must be a string, got {content!r}")
    calls = raw.get("tool_calls") or []
    if not isinstance(calls, list):
        raise ValueError(f"reply tool_calls must be a list, got {calls!r}")
    error = raw.get("error")
    return Reply(
        content=content,
        tool_calls=tuple(_parse_tool_call(call) for call in calls),
        delay=_seconds(raw.get("delay", 0.0), "delay"),
        chunk_delay=_seconds(raw.get("chunk_delay", 0.0), "chunk_delay"),
        error=None if error is None else _parse_error(error),
        repeat=_flag(raw.get("repeat", False), "repeat"),
        hold=_optional_str(raw.get("hold"), "hold"),
    )


def _parse_tool_call(raw: Any) -> ScriptedToolCall:
    """Validate one scripted tool call."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"a tool call must be a dict, got {raw!r}")
    _reject_unknown_keys(raw, _TOOL_CALL_KEYS, "tool call")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError(f"a tool call needs a non-empty string name, got {name!r}")
    arguments = raw.get("arguments", {})
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, separators=(",", ":"))
    call_id = raw.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise ValueError(f"a tool call id must be a string, got {call_id!r}")
    return ScriptedToolCall(name=name, arguments=arguments, id=call_id)


def _parse_error(raw: Any) -> ScriptedError:
    """Validate one scripted HTTP error."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"a reply error must be a dict, got {raw!r}")
    _reject_unknown_keys(raw, _ERROR_KEYS, "error")
    status = raw.get("status")
    if not isinstance(status, int) or isinstance(status, bool) or not 400 <= status <= 599:
        raise ValueError(f"error status must be an int from 400 to 599, got {status!r}")
    default_type = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error")
    return ScriptedError(
        status=status,
        message=str(raw.get("message", f"scripted error {status}")),
        type=str(raw.get("type", default_type)),
        code=_optional_str(raw.get("code"), "error code"),
        headers={str(key): str(value) for key, value in dict(raw.get("headers", {})).items()},
    )


def _reject_unknown_keys(raw: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    """Fail on keys a script entry does not understand (typos would pass silently)."""
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ValueError(f"unknown {what} keys {unknown}; allowed: {sorted(allowed)}")


def _seconds(value: Any, name: str) -> float:
    """Validate a non-negative duration."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ValueError(f"{name} must be a non-negative number of seconds, got {value!r}")
    return float(value)


def _optional_str(value: Any, name: str) -> str | None:
    """Validate an optional string."""
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{name} must be a string or null, got {value!r}")
    return value


def _flag(value: Any, name: str) -> bool:
    """Validate a boolean option."""
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    return value


class FakeModelState:
    """The script, the latency and the recorded requests, safe to share across threads."""

    def __init__(self, replies: Iterable[Mapping[str, Any]] = (), latency: float = 0.0) -> None:
        self._lock = threading.Lock()
        self._replies: list[Reply] = [parse_reply(raw) for raw in replies]
        self._latency = _seconds(latency, "latency")
        self._requests: list[JSON] = []
        self._gates: dict[str, threading.Event] = {}
        self._held: dict[str, int] = {}

    @property
    def latency(self) -> float:
        """Seconds every reply waits before it is sent."""
        with self._lock:
            return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        new_latency = _seconds(seconds, "latency")
        with self._lock:
            self._latency = new_latency

    @property
    def pending_replies(self) -> int:
        """How many scripted replies are left (a repeating one counts once)."""
        with self._lock:
            return len(self._replies)

    def script(self, replies: Iterable[Mapping[str, Any]], latency: float | None = None) -> None:
        """Replace the script, and the latency when one is given."""
        parsed = [parse_reply(raw) for raw in replies]
        new_latency = None if latency is None else _seconds(latency, "latency")
        with self._lock:
            self._replies = parsed
            if new_latency is not None:
                self._latency = new_latency

    def reset(self) -> None:
        """Clear the script, the recorded requests and the gates (opening every held stream);
        latency back to 0."""
        with self._lock:
            self._replies = []
            self._requests = []
            self._latency = 0.0
            gates, self._gates, self._held = self._gates, {}, {}
        for gate in gates.values():
            gate.set()

    def _gate(self, name: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(name, threading.Event())

    def open_gate(self, name: str) -> None:
        """Let the streams held at gate ``name`` (and later ones) go on."""
        self._gate(name).set()

    def is_held(self, name: str) -> bool:
        """Whether a stream is waiting at gate ``name`` right now."""
        with self._lock:
            return self._held.get(name, 0) > 0

    def arrive_at_gate(self, name: str) -> None:
        """Count a stream as held at gate ``name`` (before it sends the piece it stops after,
        so a client that received that piece always sees the stream held)."""
        self._gate(name)
        with self._lock:
            self._held[name] = self._held.get(name, 0) + 1

    async def wait_at_gate(self, name: str) -> None:
        """Wait (at most :data:`HOLD_LIMIT_SECONDS`) until gate ``name`` is opened."""
        gate = self._gate(name)
        try:
            await asyncio.to_thread(gate.wait, HOLD_LIMIT_SECONDS)
        finally:
            with self._lock:
                self._held[name] = self._held.get(name, 1) - 1

    def next_reply(self) -> Reply | None:
        """Take the next scripted reply (a repeating one stays); ``None`` when empty."""
        with self._lock:
            if not self._replies:
                return None
            reply = self._replies[0]
            if not reply.repeat:
                self._replies.pop(0)
            return reply

    def record(self, body: JSON) -> None:
        """Remember one request body."""
        with self._lock:
            self._requests.append(copy.deepcopy(body))

    @property
    def requests(self) -> list[JSON]:
        """Copies of the recorded request bodies, oldest first."""
        with self._lock:
            return copy.deepcopy(self._requests)


# --------------------------------------------------------------------------- tokens


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a request message that token counting sees."""
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    else:
        text = ""
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        text += str(function.get("name", "")) + str(function.get("arguments", ""))
    return text


def count_prompt_tokens(body: Mapping[str, Any]) -> int:
    """Prompt tokens of a request body (formula in the module docstring)."""
    tokens = sum(len(message_text(message)) // 4 + 1 for message in body["messages"])
    tools = body.get("tools")
    if tools:
        tokens += len(json.dumps(tools, separators=(",", ":"), sort_keys=True)) // 4
    return tokens


def count_completion_tokens(content: str | None, tool_calls: Sequence[ScriptedToolCall]) -> int:
    """Completion tokens of an answer (formula in the module docstring)."""
    text = (content or "") + "".join(call.name + call.arguments for call in tool_calls)
    return len(text) // 4 + 1


# --------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class Completion:
    """One answer, ready to be rendered as a JSON object or as SSE chunks."""

    id: str
    created: int
    model: str
    content: str | None
    tool_calls: tuple[ScriptedToolCall, ...]
    usage: JSON

    @property
    def finish_reason(self) -> str:
        """``tool_calls`` when the answer calls tools, else ``stop``."""
        return "tool_calls" if self.tool_calls else "stop"


def build_completion(body: Mapping[str, Any], reply: Reply) -> Completion:
    """Answer a validated request body with a (non-error) reply."""
    content = reply.content
    if content is None and not reply.tool_calls:
        content = DEFAULT_ANSWER_PREFIX + _last_user_text(body["messages"])
    calls = tuple(_with_call_id(call) for call in reply.tool_calls)
    prompt_tokens = count_prompt_tokens(body)
    completion_tokens = count_completion_tokens(content, calls)
    return Completion(
        id=f"chatcmpl-{uuid.uuid4().hex}",
        created=int(time.time()),
        model=str(body["model"]),
        content=content,
        tool_calls=calls,
        usage=_usage(prompt_tokens, completion_tokens),
    )


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Text of the last user message ("" when there is none)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message)
    return ""


def _with_call_id(call: ScriptedToolCall) -> ScriptedToolCall:
    """Give a scripted call a fresh ``call_<hex>`` id unless it has one."""
    if call.id is not None:
        return call
    return ScriptedToolCall(call.name, call.arguments, f"call_{uuid.uuid4().hex[:24]}")


def _usage(prompt_tokens: int, completion_tokens: int) -> JSON:
    """An OpenAI ``usage`` object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def _tool_call_json(call: ScriptedToolCall) -> JSON:
    """A tool call as it appears in a ``chat.completion`` message."""
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def completion_json(completion: Completion) -> JSON:
    """A ``chat.completion`` object."""
    message: JSON = {
        "role": "assistant",
        "content": completion.content,
        "refusal": None,
        "annotations": [],
    }
    if completion.tool_calls:
        message["tool_calls"] = [_tool_call_json(call) for call in completion.tool_calls]
    return {
        "id": completion.id,
        "object": "chat.completion",
        "created": completion.created,
        "model": completion.model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": completion.finish_reason,
            }
        ],
        "usage": completion.usage,
    }


def completion_chunks(completion: Completion, include_usage: bool) -> list[JSON]:
    """The ``chat.completion.chunk`` objects of a streamed answer, in order."""
    first_content = "" if completion.content is not None else None
    deltas: list[JSON] = [{"role": "assistant", "content": first_content, "refusal": None}]
    deltas += [{"content": piece} for piece in split_words(completion.content or "")]
    for index, call in enumerate(completion.tool_calls):
        deltas += _tool_call_deltas(index, call)
    chunks = [_chunk(completion, [_choice(delta, None)]) for delta in deltas]
    chunks.append(_chunk(completion, [_choice({}, completion.finish_reason)]))
    if include_usage:
        for chunk in chunks:
            chunk["usage"] = None
        chunks.append(_chunk(completion, [], usage=completion.usage))
    return chunks


def split_words(text: str) -> list[str]:
    """Split text into word-sized pieces that join back to exactly ``text``."""
    return _WORD_PIECES.findall(text) or ([text] if text else [])


def _tool_call_deltas(index: int, call: ScriptedToolCall) -> list[JSON]:
    """Deltas of one streamed tool call: id and name first, then argument pieces."""
    head = {
        "index": index,
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": ""},
    }
    size = _ARGUMENT_PIECE_SIZE
    pieces = [call.arguments[start : start + size] for start in range(0, len(call.arguments), size)]
    tails = [{"index": index, "function": {"arguments": piece}} for piece in pieces]
    return [{"tool_calls": [part]} for part in [head, *tails]]


def _choice(delta: JSON, finish_reason: str | None) -> JSON:
    """One streamed choice."""
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}


def _chunk(completion: Completion, choices: list[JSON], usage: JSON | None = None) -> JSON:
    """One ``chat.completion.chunk`` object."""
    chunk: JSON = {
        "id": completion.id,
        "object": "chat.completion.chunk",
        "created": completion.created,
        "model": completion.model,
        "system_fingerprint": "fp_fake",
        "choices": choices,
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


async def _sse_events(
    chunks: Sequence[JSON],
    chunk_delay: float,
    state: FakeModelState | None = None,
    hold: str | None = None,
) -> AsyncIterator[str]:
    """Server-Sent Events for the chunks, then ``[DONE]``; with ``hold``, the stream waits at
    that gate after the first content piece (the second chunk)."""
    holding = state is not None and hold is not None and len(chunks) > 2
    for position, chunk in enumerate(chunks):
        if holding and position == 1:
            state.arrive_at_gate(hold)  # type: ignore[union-attr, arg-type]
        if holding and position == 2:
            await state.wait_at_gate(hold)  # type: ignore[union-attr, arg-type]
        if position and chunk_delay:
            await asyncio.sleep(chunk_delay)
        yield f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"
    yield "data: [DONE]\n\n"


# --------------------------------------------------------------------------- validation


class InvalidRequest(Exception):
    """A request the real API would reject with 400."""


def validate_chat_request(body: Any) -> JSON:
    """Check a chat-completions body the way the real API does; return it."""
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise InvalidRequest("you must provide a model parameter")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise InvalidRequest("'messages' must be a non-empty array.")
    for position, message in enumerate(messages):
        _check_message(position, message)
    _check_tool_call_pairing(messages)
    stream = body.get("stream", False)
    if stream is not None and not isinstance(stream, bool):
        raise InvalidRequest("'stream' must be a boolean.")
    if body.get("stream_options") is not None and not stream:
        raise InvalidRequest(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled."
        )
    return body


def _check_message(position: int, message: Any) -> None:
    """Check the shape of one message."""
    if not isinstance(message, dict) or message.get("role") not in _ROLES:
        raise InvalidRequest(f"messages[{position}] needs a role out of {sorted(_ROLES)}.")
    for call in message.get("tool_calls") or []:
        if not isinstance(call, dict) or not isinstance(call.get("id"), str):
            raise InvalidRequest(f"messages[{position}].tool_calls entries need a string id.")


def _check_tool_call_pairing(messages: Sequence[JSON]) -> None:
    """Each tool call must be answered by tool messages, and only tool calls may be."""
    unanswered: list[str] = []
    for message in messages:
        if message["role"] == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in unanswered:
                raise InvalidRequest(
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'."
                )
            unanswered.remove(call_id)
            continue
        _fail_if_unanswered(unanswered)
        if message["role"] == "assistant":
            unanswered = [call["id"] for call in message.get("tool_calls") or []]
    _fail_if_unanswered(unanswered)


def _fail_if_unanswered(unanswered: Sequence[str]) -> None:
    """Reject a conversation that moves on before answering every tool call."""
    if unanswered:
        raise InvalidRequest(
            "An assistant message with 'tool_calls' must be followed by tool messages "
            "responding to each 'tool_call_id'. The following tool_call_ids did not have "
            f"response messages: {', '.join(unanswered)}"
        )


# --------------------------------------------------------------------------- HTTP app


def error_response(
    status: int,
    message: str,
    error_type: str,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An error in OpenAI's format: ``{"error": {"message", "type", "param", "code"}}``."""
    body = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def _has_bearer_token(request: Request) -> bool:
    """Whether the request carries ``Authorization: Bearer <something>``."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(token.strip())


def _unauthorized() -> JSONResponse:
    """The 401 the real API sends without a key."""
    return error_response(
        401,
        "You didn't provide an API key. You need to provide your API key in an Authorization "
        "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
        "invalid_request_error",
        "invalid_api_key",
    )


async def _json_body(request: Request) -> Any:
    """The parsed JSON body, or ``InvalidRequest``."""
    try:
        return json.loads(await request.body())
    except ValueError as exc:
        raise InvalidRequest("We could not parse the JSON body of your request.") from exc


def _scripted_error_response(error: ScriptedError) -> JSONResponse:
    """The response for a scripted error."""
    return error_response(error.status, error.message, error.type, error.code, error.headers)


def _answer(body: JSON, reply: Reply, state: FakeModelState) -> Response:
    """A JSON or SSE response for a non-error reply."""
    completion = build_completion(body, reply)
    if not body.get("stream"):
        return JSONResponse(completion_json(completion))
    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
    chunks = completion_chunks(completion, include_usage)
    return StreamingResponse(
        _sse_events(chunks, reply.chunk_delay, state, reply.hold),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache"},
    )


def _chat_completions(state: FakeModelState) -> Endpoint:
    """The ``POST /v1/chat/completions`` endpoint bound to ``state``."""

    async def chat_completions(request: Request) -> Response:
        if not _has_bearer_token(request):
            return _unauthorized()
        try:
            body = validate_chat_request(await _json_body(request))
        except InvalidRequest as exc:
            return error_response(400, str(exc), "invalid_request_error")
        state.record(body)
        reply = state.next_reply() or Reply()
        wait = state.latency + reply.delay
        if wait:
            await asyncio.sleep(wait)
        if reply.error is not None:
            return _scripted_error_response(reply.error)
        return _answer(body, reply, state)

    return chat_completions


async def _list_models(request: Request) -> Response:
    """The ``GET /v1/models`` endpoint."""
    if not _has_bearer_token(request):
        return _unauthorized()
    data = [
        {"id": model_id, "object": "model", "created": 0, "owned_by": "juru-fake"}
        for model_id in MODEL_IDS
    ]
    return JSONResponse({"object": "list", "data": data})


def _control_script(state: FakeModelState) -> Endpoint:
    """The ``POST /_control/script`` endpoint bound to ``state``."""

    async def control_script(request: Request) -> Response:
        try:
            body = await _json_body(request)
            if not isinstance(body, dict) or not isinstance(body.get("replies"), list):
                raise InvalidRequest('expected {"replies": [...], "latency": optional float}')
            state.script(body["replies"], body.get("latency"))
        except (InvalidRequest, ValueError) as exc:
            return error_response(400, str(exc), "invalid_request_error")
        return JSONResponse({"ok": True, "pending_replies": state.pending_replies})

    return control_script


def _control_open(state: FakeModelState) -> Endpoint:
    """The ``POST /_control/open`` endpoint bound to ``state``."""

    async def control_open(request: Request) -> Response:
        body = await _json_body(request)
        if not isinstance(body, dict) or not isinstance(body.get("gate"), str):
            return error_response(400, 'expected {"gate": "name"}', "invalid_request_error")
        state.open_gate(body["gate"])
        return JSONResponse({"ok": True})

    return control_open


def _control_reset(state: FakeModelState) -> Endpoint:
    """The ``POST /_control/reset`` endpoint bound to ``state``."""

    async def control_reset(request: Request) -> Response:
        state.reset()
        return JSONResponse({"ok": True})

    return control_reset


def _control_requests(state: FakeModelState) -> Endpoint:
    """The ``GET /_control/requests`` endpoint bound to ``state``."""

    async def control_requests(request: Request) -> Response:
        return JSONResponse(state.requests)

    return control_requests


async def _http_error(request: Request, exc: Exception) -> Response:
    """Unknown routes and wrong methods, in OpenAI's error format."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    return error_response(
        status, f"{request.method} {request.url.path}: {exc}", "invalid_request_error"
    )


def create_fake_openai_app(state: FakeModelState) -> Starlette:
    """The ASGI app serving the fake API and its control endpoints (``app.state.fake_model``)."""
    routes = [
        Route("/v1/chat/completions", _chat_completions(state), methods=["POST"]),
        Route("/v1/models", _list_models, methods=["GET"]),
        Route("/_control/script", _control_script(state), methods=["POST"]),
        Route("/_control/reset", _control_reset(state), methods=["POST"]),
        Route("/_control/open", _control_open(state), methods=["POST"]),
        Route("/_control/requests", _control_requests(state), methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    app.state.fake_model = state
    return app


# --------------------------------------------------------------------------- server


class FakeOpenAIServer:
    """Runs the fake API with uvicorn in a background thread on 127.0.0.1."""

    def __init__(
        self,
        state: FakeModelState | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = 10.0,
    ) -> None:
        self.state = state if state is not None else FakeModelState()
        self.host = host
        self._requested_port = port
        self._startup_timeout = startup_timeout
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        """The bound port (only while running)."""
        if self._port is None:
            raise RuntimeError("the fake OpenAI server is not running")
        return self._port

    @property
    def url(self) -> str:
        """Root URL, e.g. ``http://127.0.0.1:PORT`` (the control endpoints live here)."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """OpenAI base URL, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"{self.url}/v1"

    def start(self) -> Self:
        """Start serving; returns once the server accepts connections."""
        if self._thread is not None:
            raise RuntimeError("the fake OpenAI server is already running")
        server = uvicorn.Server(self._config())
        thread = threading.Thread(target=server.run, name="fake-openai-server", daemon=True)
        thread.start()
        self._server, self._thread = server, thread
        try:
            self._wait_until_started(server, thread)
        except BaseException:
            self.stop()
            raise
        self._port = int(server.servers[0].sockets[0].getsockname()[1])
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving and wait for the server thread to end."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        server.should_exit = True
        thread.join(timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout)
        self._server = self._thread = None
        self._port = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def script(self, replies: Iterable[Mapping[str, Any]], latency: float | None = None) -> None:
        """Replace the script (see :meth:`FakeModelState.script`)."""
        self.state.script(replies, latency)

    def reset(self) -> None:
        """Clear script, recorded requests, gates and latency."""
        self.state.reset()

    def open_gate(self, name: str) -> None:
        """Let streams held at gate ``name`` go on (see the ``hold`` reply key)."""
        self.state.open_gate(name)

    def is_held(self, name: str) -> bool:
        """Whether a stream is waiting at gate ``name``."""
        return self.state.is_held(name)

    def requests(self) -> list[JSON]:
        """The recorded chat-completion request bodies, oldest first."""
        return self.state.requests

    def _config(self) -> uvicorn.Config:
        """Uvicorn settings that leave global logging alone."""
        return uvicorn.Config(
            create_fake_openai_app(self.state),
            host=self.host,
            port=self._requested_port,
            log_config=None,
            log_level=None,
            lifespan="off",
            ws="none",
            timeout_graceful_shutdown=2,
        )

    def _wait_until_started(self, server: uvicorn.Server, thread: threading.Thread) -> None:
        """Block until uvicorn sets ``started``; fail if it dies or the deadline passes."""
        deadline = time.monotonic() + self._startup_timeout
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the fake OpenAI server failed to start (see its log)")
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"the fake OpenAI server did not start in {self._startup_timeout}s"
                )
            thread.join(_STARTUP_POLL_SECONDS)


# --------------------------------------------------------------------------- process


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options of the process mode."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.fake_openai",
        description="Fake OpenAI chat-completions server; prints 'LISTENING <base_url>'.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each reply")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT, after printing ``LISTENING <base_url>``."""
    args = _parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    stop_requested = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop_requested.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    state = FakeModelState(latency=args.latency)
    with FakeOpenAIServer(state, host=args.host, port=args.port) as server:
        print(f"LISTENING {server.base_url}", flush=True)
        stop_requested.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
