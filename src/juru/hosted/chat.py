"""`POST /v1/chat/completions`: one model call in OpenAI's shape, routed by the catalog to its
provider through the same LangChain chat models that drive agents, and billed (source `chat`).

The most the call can cost is held before it is sent. The call then runs in a task of its own,
so that it is charged (and its hold settled) even when the client leaves before the answer or
the stream's end: the provider's usage comes with its last piece.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.runnables import Runnable

from juru.billing.meter import Meter
from juru.core.errors import (
    DomainError,
    InvalidRequestError,
    NotFoundError,
    UpstreamError,
)
from juru.core.text import public_message
from juru.hosted.agents import parameters_problem
from juru.models.catalog import ModelCatalog, ProviderNotConfiguredError, UnknownModelError
from juru.models.streams import joined, until_silent

logger = logging.getLogger(__name__)
T = TypeVar("T")
SAMPLING_FIELDS = ("temperature", "top_p", "max_tokens", "stop", "seed")
CHAT_SOURCE = "chat"


@dataclass(frozen=True)
class PreparedChat:
    """A checked request, ready to be sent: who pays, which model, what to send."""

    account_id: str
    model_id: str
    runnable: Runnable[Any, Any]
    messages: list[BaseMessage]
    include_usage: bool
    completion_id: str
    created: int
    hold_id: str | None = None


@dataclass(frozen=True)
class _Whole:
    """The provider's stream ended: the whole reply, with its usage."""

    reply: AIMessageChunk


@dataclass(frozen=True)
class _StreamFailed:
    """The provider's stream broke (`error`); `at_once`: before its first piece."""

    error: Exception
    at_once: bool


CHAT_ROLES = ("system", "developer", "user", "assistant", "tool")


def _check_tool_calls(where: str, calls: Any) -> None:
    if not isinstance(calls, list):
        raise InvalidRequestError(f"{where}.tool_calls: must be a list")
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(call, dict) or not isinstance(call.get("id"), str):
            raise InvalidRequestError(f"{where}.tool_calls.{index}: needs an `id` (a string)")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise InvalidRequestError(f"{where}.tool_calls.{index}.function: needs a `name`")
        if not isinstance(function.get("arguments", ""), str):
            raise InvalidRequestError(
                f"{where}.tool_calls.{index}.function.arguments: must be a JSON string"
            )


def check_message(index: int, item: Any) -> None:
    """The shape OpenAI documents for one input message, checked here so that a refusal names
    the field in Juru's words (LangChain's own errors carry links and class names)."""
    where = f"messages.{index}"
    if not isinstance(item, dict):
        raise InvalidRequestError(f"{where}: must be an object")
    role = item.get("role")
    if role not in CHAT_ROLES:
        raise InvalidRequestError(f"{where}.role: must be one of {', '.join(CHAT_ROLES)}")
    content = item.get("content")
    if content is not None and not isinstance(content, str | list):
        raise InvalidRequestError(f"{where}.content: must be a string or a list of parts")
    for part_index, part in enumerate(content if isinstance(content, list) else []):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise InvalidRequestError(f"{where}.content.{part_index}: needs a `type`")
    if role == "tool" and not isinstance(item.get("tool_call_id"), str):
        raise InvalidRequestError(f"{where}.tool_call_id: a tool message needs one")
    if role == "assistant" and item.get("tool_calls") is not None:
        _check_tool_calls(where, item["tool_calls"])
    elif content is None:
        raise InvalidRequestError(f"{where}.content: required")


def check_tools(tools: Any) -> None:
    """Each chat tool is `{"type": "function", "function": {"name", ...}}`."""
    for index, tool in enumerate(tools or []):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise InvalidRequestError(f'tools.{index}.type: must be "function"')
        if not isinstance(function, dict):
            raise InvalidRequestError(f"tools.{index}.function: required (an object)")
        name = function.get("name")
        if not isinstance(name, str) or not name.strip():
            raise InvalidRequestError(f"tools.{index}.function.name: required (a string)")
        parameters = function.get("parameters")
        problem = None if parameters is None else parameters_problem(parameters)
        if problem is not None:
            raise InvalidRequestError(f"tools.{index}.function.parameters: {problem}")


def _messages(raw: list[Any]) -> list[BaseMessage]:
    for index, item in enumerate(raw):
        check_message(index, item)
    # OpenAI lets an assistant message with tool calls leave out its content.
    normalized = [{**item, "content": item.get("content") or ""} for item in raw]
    try:
        return convert_to_messages(normalized)
    except (ValueError, TypeError, KeyError, NotImplementedError):
        raise InvalidRequestError(
            "messages: a message could not be read as a chat message"
        ) from None


def _finish_reason(message: AIMessage | AIMessageChunk) -> str:
    if message.tool_calls or getattr(message, "tool_call_chunks", None):
        return "tool_calls"
    reason = message.response_metadata.get("finish_reason")
    return reason if reason in ("length", "content_filter") else "stop"


def _usage(message: AIMessage | AIMessageChunk) -> dict[str, int]:
    usage = message.usage_metadata or {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    return {
        "prompt_tokens": usage["input_tokens"],
        "completion_tokens": usage["output_tokens"],
        "total_tokens": usage["input_tokens"] + usage["output_tokens"],
    }


def _upstream_error(error: Exception) -> DomainError:
    status = getattr(error, "status_code", None)
    detail = public_message(f"{type(error).__name__}: {error}")
    if status == 400:
        return InvalidRequestError(f"the provider refused the request: {detail}")
    return UpstreamError(f"the model provider failed: {detail}")


class ChatCompletions:
    def __init__(self, catalog: ModelCatalog, meter: Meter, provider_env: Mapping[str, str]):
        self.catalog = catalog
        self.meter = meter
        self.provider_env = provider_env
        # Calls that outlive their request (the client left): kept until they are charged.
        self.calls_in_flight: set[asyncio.Task[Any]] = set()

    def _in_own_task(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(work)
        self.calls_in_flight.add(task)
        task.add_done_callback(self.calls_in_flight.discard)
        return task

    def _model(self, model_id: str) -> BaseChatModel:
        try:
            return self.catalog.chat_model(model_id, self.provider_env)
        except UnknownModelError:
            raise NotFoundError(
                f"model {model_id!r} is not in the catalog (GET /v1/models)", "model_not_found"
            ) from None
        except ProviderNotConfiguredError as error:
            # A 4xx: the SDKs retry 5xx answers, and no retry helps until the server is set up.
            raise InvalidRequestError(str(error), "provider_not_configured") from None

    async def prepare(self, account_id: str, request: Mapping[str, Any]) -> PreparedChat:
        """Check the model and the messages, then hold the most the call can cost; 4xx for
        anything wrong (402 when the hold does not fit)."""
        model_id = str(request["model"])
        model = self._model(model_id)
        check_tools(request.get("tools"))
        messages = _messages(request["messages"])
        runnable: Runnable[Any, Any] = model
        if request.get("tools"):
            choice = request.get("tool_choice")
            runnable = model.bind_tools(request["tools"], tool_choice=choice)
        elif request.get("tool_choice") not in (None, "none", "auto"):
            raise InvalidRequestError("tool_choice needs tools")
        sampling = {name: request[name] for name in SAMPLING_FIELDS if name in request}
        if sampling:
            runnable = runnable.bind(**sampling)
        options = request.get("stream_options") or {}
        hold_id = await self.meter.hold_call(
            account_id, model_id, messages, request.get("tools") or [], request.get("max_tokens")
        )
        return PreparedChat(
            account_id=account_id,
            model_id=model_id,
            runnable=runnable,
            messages=messages,
            include_usage=bool(options.get("include_usage")),
            completion_id=f"chatcmpl-{uuid.uuid4().hex}",
            created=int(time.time()),
            hold_id=hold_id,
        )

    async def _charge(self, chat: PreparedChat, reply: AIMessage | AIMessageChunk) -> None:
        await self.meter.charge(
            chat.account_id,
            chat.model_id,
            reply.usage_metadata,
            CHAT_SOURCE,
            hold_id=chat.hold_id,
        )

    async def _release(self, chat: PreparedChat) -> None:
        await self.meter.release(chat.account_id, [chat.hold_id])

    async def _call(self, chat: PreparedChat) -> AIMessage:
        """The model call and its charge (or, if it fails, its hold given back)."""
        try:
            reply = await chat.runnable.ainvoke(chat.messages)
        except BaseException as error:
            await self._release(chat)
            if isinstance(error, Exception):
                raise _upstream_error(error) from error
            raise
        await self._charge(chat, reply)
        assert isinstance(reply, AIMessage)
        return reply

    async def complete(self, chat: PreparedChat) -> dict[str, Any]:
        """One `chat.completion` object; the call is charged before it is returned, and
        still charged if the client leaves while it runs."""
        reply = await asyncio.shield(self._in_own_task(self._call(chat)))
        message = convert_to_openai_messages(reply)
        assert isinstance(message, dict)
        message.pop("id", None)
        if not isinstance(message.get("content"), str):
            message["content"] = reply.text or None
        if message.get("tool_calls") and not message.get("content"):
            message["content"] = None
        return {
            "id": chat.completion_id,
            "object": "chat.completion",
            "created": chat.created,
            "model": chat.model_id,
            "choices": [{"index": 0, "message": message, "finish_reason": _finish_reason(reply)}],
            "usage": _usage(reply),
        }

    def _chunk(
        self, chat: PreparedChat, delta: dict[str, Any], finish: str | None
    ) -> dict[str, Any]:
        return {
            "id": chat.completion_id,
            "object": "chat.completion.chunk",
            "created": chat.created,
            "model": chat.model_id,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    async def start_stream(self, chat: PreparedChat) -> AsyncIterator[dict[str, Any]]:
        """Start reading the provider's stream and wait for its first piece, so that a provider
        failing at once is an HTTP error, not a broken stream; then the chunks follow."""
        pieces: asyncio.Queue[Any] = asyncio.Queue()
        self._in_own_task(self._read_provider(chat, pieces))
        first = await pieces.get()
        if isinstance(first, _StreamFailed) and first.at_once:
            raise _upstream_error(first.error) from first.error
        return self._stream(chat, first, pieces)

    async def _read_provider(self, chat: PreparedChat, pieces: asyncio.Queue[Any]) -> None:
        """Read the provider's stream to its end into `pieces` (then the whole reply), and
        charge it, whether or not the client is still reading."""
        received: list[AIMessageChunk] = []
        try:
            async for piece in until_silent(chat.runnable.astream(chat.messages)):
                if isinstance(piece, AIMessageChunk):
                    received.append(piece)
                    pieces.put_nowait(piece)
        except Exception as error:
            pieces.put_nowait(_StreamFailed(error, at_once=not received))
            total = joined(received)
            if total is None or total.usage_metadata is None:
                await self._release(chat)
            else:
                await self._charge(chat, total)
            return
        except BaseException:
            await asyncio.shield(self._release(chat))
            raise
        final = joined(received) or AIMessageChunk(content="")
        try:
            await self._charge(chat, final)
        except Exception:
            logger.exception("chat completion %s could not be charged", chat.completion_id)
        pieces.put_nowait(_Whole(final))

    async def _stream(
        self, chat: PreparedChat, first: Any, pieces: asyncio.Queue[Any]
    ) -> AsyncIterator[dict[str, Any]]:
        """`chat.completion.chunk` objects as the provider streams; the last piece of the
        queue is the whole reply, charged by then."""
        yield self._chunk(chat, {"role": "assistant", "content": ""}, None)
        item = first
        while not isinstance(item, _Whole):
            if isinstance(item, _StreamFailed):
                raise item.error
            delta = _delta(item)
            if delta:
                yield self._chunk(chat, delta, None)
            item = await pieces.get()
        final = item.reply
        yield self._chunk(chat, {}, _finish_reason(final))
        if chat.include_usage:
            yield {**self._chunk(chat, {}, None), "choices": [], "usage": _usage(final)}


def _delta(piece: AIMessageChunk) -> dict[str, Any]:
    """A provider's piece as the `delta` of a chunk (empty when it carries nothing to show)."""
    delta: dict[str, Any] = {}
    if piece.text:
        delta["content"] = piece.text
    if piece.tool_call_chunks:
        delta["tool_calls"] = [
            {
                "index": part.get("index") or 0,
                **({"id": part["id"], "type": "function"} if part.get("id") else {}),
                "function": {
                    **({"name": part["name"]} if part.get("name") else {}),
                    "arguments": part.get("args") or "",
                },
            }
            for part in piece.tool_call_chunks
        ]
    return delta


def sse_lines(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    """Server-sent events as OpenAI streams them: `data: {json}` per chunk, then `[DONE]`; a
    failure after the stream began is sent as a last `data: {"error": ...}` event."""

    async def lines() -> AsyncIterator[str]:
        try:
            async for chunk in chunks:
                yield f"data: {json.dumps(chunk)}\n\n"
        except Exception as error:
            failure = error if isinstance(error, DomainError) else _upstream_error(error)
            body = {"error": {"code": failure.code, "message": failure.message}}
            yield f"data: {json.dumps(body)}\n\n"
            return
        yield "data: [DONE]\n\n"

    return lines()
