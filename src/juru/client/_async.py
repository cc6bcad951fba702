"""`AsyncJuru`: the asyncio client, the same resources as `Juru` with `await`."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx
from httpx_sse import aconnect_sse
from tenacity import AsyncRetrying

from juru.client import _calls as calls
from juru.client import tool_calls as tools_
from juru.client._streams import StreamProgress, event_of, is_event_stream, reconnect_policy
from juru.client._transport import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_SECONDS,
    base_url_of,
    connection_error,
    headers_for,
    read,
    request_options,
    retry_policy,
)
from juru.client.errors import NotFoundError, error_from_response
from juru.client.models import (
    Account,
    Agent,
    Deleted,
    Document,
    File,
    Message,
    Model,
    Page,
    Run,
    RunEvent,
    Thread,
    ToolCall,
    Usage,
)

T = TypeVar("T")


class AsyncJuru:
    """An asyncio client of a Juru server's `/v1` API (and its playground).

    `base_url` and `api_key` default to `JURU_BASE_URL` (else http://127.0.0.1:8000) and
    `JURU_API_KEY`. Refusals raise `APIStatusError` subclasses; 429, 503 and connection errors
    are retried `max_retries` times. Use it as an async context manager, or await `close()`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = DEFAULT_MAX_RETRIES,
    ) -> None:
        self.base_url = base_url_of(base_url)
        self.max_retries = max_retries
        self.http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers_for(api_key), timeout=timeout
        )
        self.agents = Agents(self)
        self.threads = Threads(self)
        self.runs = Runs(self)
        self.files = Files(self)
        self.documents = Documents(self)
        self.models = Models(self)
        self.playground = Playground(self)

    async def __aenter__(self) -> AsyncJuru:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.http.aclose()

    async def send(self, call: calls.Call[T]) -> T:
        """Send `call` (again on a retryable failure) and read its answer."""
        async for attempt in AsyncRetrying(**retry_policy(call, self.max_retries)):
            with attempt:
                return read(call, await self._response(call))
        raise AssertionError("unreachable: tenacity re-raises the last failure")

    async def _response(self, call: calls.Call[Any]) -> httpx.Response:
        try:
            return await self.http.request(call.method, call.path, **request_options(call))
        except httpx.TransportError as error:
            raise connection_error(error, self.base_url) from error

    async def account(self) -> Account:
        return await self.send(calls.get_account())

    async def usage(
        self, since: date | str | None = None, until: date | str | None = None
    ) -> Usage:
        """Spend per day, source and model between two days (the server's default: 30 days)."""
        return await self.send(calls.get_usage(since, until))


class AsyncPager(Generic[T]):
    """Every item of a list (`async for`), one page at a time as the iteration needs them."""

    def __init__(self, fetch: Callable[[str | None], Awaitable[Page[T]]]) -> None:
        self._fetch = fetch

    async def __aiter__(self) -> AsyncIterator[T]:
        after: str | None = None
        while True:
            page = await self._fetch(after)
            for item in page.data:
                yield item
            if not page.has_more or page.next_cursor is None:
                return
            after = page.next_cursor

    async def page(self, after: str | None = None) -> Page[T]:
        """One page, after the cursor given."""
        return await self._fetch(after)


class Resource:
    def __init__(self, client: AsyncJuru) -> None:
        self._client = client


class Agents(Resource):
    async def create(
        self,
        name: str,
        model_id: str,
        *,
        system_prompt: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        builtin_tools: Sequence[str] | None = None,
        max_steps: int | None = None,
        agent_tools: Sequence[Mapping[str, str]] | None = None,
        mcp_servers: Sequence[Mapping[str, Any]] | None = None,
    ) -> Agent:
        body = calls.agent_body(
            name, model_id, system_prompt, tools, builtin_tools, max_steps, agent_tools, mcp_servers
        )
        return await self._client.send(calls.create_agent(body))

    async def get(self, agent_id: str) -> Agent:
        return await self._client.send(calls.get_agent(agent_id))

    def list(self, *, limit: int | None = None) -> AsyncPager[Agent]:
        return AsyncPager(lambda after: self._client.send(calls.list_agents(limit, after)))

    async def update(
        self,
        agent_id: str,
        *,
        name: str | None = None,
        model_id: str | None = None,
        system_prompt: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        builtin_tools: Sequence[str] | None = None,
        max_steps: int | None = None,
        agent_tools: Sequence[Mapping[str, str]] | None = None,
        mcp_servers: Sequence[Mapping[str, Any]] | None = None,
    ) -> Agent:
        body = calls.agent_body(
            name, model_id, system_prompt, tools, builtin_tools, max_steps, agent_tools, mcp_servers
        )
        return await self._client.send(calls.update_agent(agent_id, body))

    async def delete(self, agent_id: str) -> Deleted:
        return await self._client.send(calls.delete_agent(agent_id))


class Threads(Resource):
    async def create(
        self, agent_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> Thread:
        return await self._client.send(calls.create_thread(agent_id, title, metadata))

    async def get(self, thread_id: str) -> Thread:
        return await self._client.send(calls.get_thread(thread_id))

    def list(self, agent_id: str, *, limit: int | None = None) -> AsyncPager[Thread]:
        return AsyncPager(
            lambda after: self._client.send(calls.list_threads(agent_id, limit, after))
        )

    def messages(self, thread_id: str, *, limit: int | None = None) -> AsyncPager[Message]:
        return AsyncPager(
            lambda after: self._client.send(calls.list_messages(thread_id, limit, after))
        )


class Runs(Resource):
    async def create(
        self,
        thread_id: str,
        input: calls.RunInput,
        *,
        idempotency_key: str | None = None,
        wait: float | None = None,
    ) -> Run:
        """A new run; with `wait` (at most 30 s), as soon as it needs tool outputs or has
        ended."""
        return await self._client.send(calls.create_run(thread_id, input, idempotency_key, wait))

    async def get(self, run_id: str, *, wait: float | None = None) -> Run:
        """The run; with `wait` (at most 30 s), as soon as it needs tool outputs or has ended."""
        return await self._client.send(calls.get_run(run_id, wait))

    def list(
        self,
        thread_id: str | None = None,
        *,
        parent_run_id: str | None = None,
        limit: int | None = None,
    ) -> AsyncPager[Run]:
        """A thread's runs; without a thread, the account's (with `parent_run_id`, the child
        runs that run started)."""
        return AsyncPager(
            lambda after: self._client.send(calls.list_runs(thread_id, limit, after, parent_run_id))
        )

    async def cancel(self, run_id: str) -> Run:
        return await self._client.send(calls.cancel_run(run_id))

    async def submit_tool_outputs(
        self, run_id: str, outputs: Sequence[Mapping[str, str]], *, wait: float | None = None
    ) -> Run:
        """`outputs`: `[{"tool_call_id": ..., "output": ...}]`, one per pending call. With
        `wait` (at most 30 s), the run as soon as it needs tool outputs again or has ended."""
        return await self._client.send(calls.submit_tool_outputs(run_id, outputs, wait))

    async def events(self, run_id: str, *, after: int | None = None) -> AsyncIterator[RunEvent]:
        """The run's events after `after` on one connection, until the run ends; a dropped
        connection raises `APIConnectionError` (`stream` resumes instead)."""
        async for event in self._events_once(run_id, StreamProgress(after)):
            yield event

    async def stream(self, run_id: str, *, after: int | None = None) -> AsyncIterator[RunEvent]:
        """The run's events after `after` until it ends. A dropped connection is opened again
        from the last event's id, so no event is lost or repeated."""
        progress = StreamProgress(after)
        async for attempt in AsyncRetrying(**reconnect_policy(progress, self._client.max_retries)):
            with attempt:
                async for event in self._events_once(run_id, progress):
                    yield event
                return

    async def _events_once(self, run_id: str, progress: StreamProgress) -> AsyncIterator[RunEvent]:
        http, path = self._client.http, calls.events_path(run_id)
        try:
            async with aconnect_sse(http, "GET", path, headers=progress.headers()) as source:
                response = source.response
                if response.status_code == 204:  # ended, nothing after the last id
                    progress.ended = True
                    return
                if response.is_error or not is_event_stream(response):
                    await response.aread()
                    raise error_from_response(response)
                async for sse in source.aiter_sse():
                    if not sse.data:  # a heartbeat comment (httpx-sse yields it)
                        continue
                    event = event_of(sse, progress)
                    yield event
                    if progress.ended:
                        return
        except httpx.TransportError as error:
            raise connection_error(error, self._client.base_url) from error
        progress.closed_early()

    async def run_until_done(
        self,
        thread_id: str,
        input: calls.RunInput,
        *,
        tools: Mapping[str, tools_.ToolFunction] | None = None,
        stream: bool = True,
    ) -> Run:
        """`Juru.runs.run_until_done`, awaited: async tool functions are awaited, plain ones
        run in a worker thread so they do not block the event loop."""
        functions = dict(tools or {})
        if not stream:
            run = await self.create(thread_id, input, wait=calls.MAX_WAIT_SECONDS)
            return await self._poll_to_end(run, functions)
        run = await self.create(thread_id, input)
        try:
            return await self._follow_to_end(run, functions)
        except StreamsUnavailable:
            return await self._poll_to_end(run, functions)

    async def _follow_to_end(self, run: Run, functions: Mapping[str, tools_.ToolFunction]) -> Run:
        latest = run
        try:
            async for event in self.stream(run.id):
                if event.run is None:
                    continue
                latest = event.run
                if latest.status == "requires_action":
                    await self._answer(latest, functions)
        except NotFoundError as error:
            raise StreamsUnavailable() from error
        return latest

    async def _poll_to_end(self, run: Run, functions: Mapping[str, tools_.ToolFunction]) -> Run:
        while not run.is_terminal:
            if run.status == "requires_action":
                run = await self._answer(run, functions, wait=calls.MAX_WAIT_SECONDS)
            else:
                run = await self.get(run.id, wait=calls.MAX_WAIT_SECONDS)
        return run

    async def _answer(
        self, run: Run, functions: Mapping[str, tools_.ToolFunction], wait: float | None = None
    ) -> Run:
        pending = run.pending_tool_calls or []
        tools_.check_known(pending, functions, run.id)
        texts = await asyncio.gather(*(self._call(call, functions) for call in pending))
        outputs = [tools_.output(call, text) for call, text in zip(pending, texts, strict=True)]
        return await self.submit_tool_outputs(run.id, outputs, wait=wait)

    @staticmethod
    async def _call(call: ToolCall, functions: Mapping[str, tools_.ToolFunction]) -> str:
        function = functions[call.name]
        try:
            arguments = tools_.arguments_of(call)
            if inspect.iscoroutinefunction(function):
                result = await tools_.invoke(function, arguments)
            else:
                result = await asyncio.to_thread(tools_.invoke, function, arguments)
                if inspect.isawaitable(result):
                    result = await result
            return tools_.output_text(result)
        except Exception as error:  # the model is told, and can react
            return tools_.error_text(error)


class StreamsUnavailable(Exception):
    """The server has no event stream for runs: follow with `?wait=` instead."""


class Files(Resource):
    def list(self, *, limit: int | None = None) -> AsyncPager[File]:
        """The account's files (audio made by `text_to_speech`), newest first."""
        return AsyncPager(lambda after: self._client.send(calls.list_files(limit, after)))

    async def get(self, file_id: str) -> File:
        return await self._client.send(calls.get_file(file_id))

    async def content(self, file_id: str) -> bytes:
        return await self._client.send(calls.file_content(file_id))


class Documents(Resource):
    async def upload(
        self,
        file: Path | str | bytes,
        *,
        filename: str | None = None,
        title: str | None = None,
        content_type: str | None = None,
    ) -> Document:
        """Add a `.txt`, `.md` or `.pdf` file (a path, or bytes with a `filename`)."""
        return await self._client.send(calls.upload_document(file, filename, title, content_type))

    def list(self, *, limit: int | None = None) -> AsyncPager[Document]:
        return AsyncPager(lambda after: self._client.send(calls.list_documents(limit, after)))

    async def get(self, document_id: str) -> Document:
        return await self._client.send(calls.get_document(document_id))

    async def delete(self, document_id: str) -> Deleted:
        return await self._client.send(calls.delete_document(document_id))


class Models(Resource):
    async def list(self) -> list[Model]:
        return await self._client.send(calls.list_models())

    async def get(self, model_id: str) -> Model:
        return await self._client.send(calls.get_model(model_id))


class Playground(Resource):
    """The playground's features (no key needed; the server must have it on)."""

    async def features(self) -> list[dict[str, Any]]:
        return await self._client.send(calls.playground_features())

    async def stream(
        self, feature: str, message: str, *, thread_id: str | None = None
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """A turn as `(event, data)` pairs: `step`, `text`, then `turn` (or `error`)."""
        body = calls.playground_body(feature, thread_id, message=message)
        async for item in self._turn("/playground/messages/stream", body):
            yield item

    async def resume(
        self, feature: str, thread_id: str, value: Any
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """A paused turn resumed with `value` (review decisions: `{"decisions": [...]}`)."""
        body = calls.playground_body(feature, thread_id, value=value)
        async for item in self._turn("/playground/resume/stream", body):
            yield item

    async def _turn(
        self, path: str, body: dict[str, Any]
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        try:
            async with aconnect_sse(self._client.http, "POST", path, json=body) as source:
                if source.response.is_error:
                    await source.response.aread()
                    raise error_from_response(source.response)
                async for sse in source.aiter_sse():
                    yield sse.event, sse.json()
        except httpx.TransportError as error:
            raise connection_error(error, self._client.base_url) from error
