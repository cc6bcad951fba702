"""`Juru`: the blocking client."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Generic, TypeVar

import httpx
from httpx_sse import connect_sse
from tenacity import Retrying

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


class Juru:
    """A client of a Juru server's `/v1` API (and its playground).

    `base_url` and `api_key` default to `JURU_BASE_URL` (else http://127.0.0.1:8000) and
    `JURU_API_KEY`. Refusals raise `APIStatusError` subclasses; 429, 503 and connection errors
    are retried `max_retries` times. Use it as a context manager, or call `close()`.
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
        self.http = httpx.Client(
            base_url=self.base_url, headers=headers_for(api_key), timeout=timeout
        )
        self.agents = Agents(self)
        self.threads = Threads(self)
        self.runs = Runs(self)
        self.files = Files(self)
        self.documents = Documents(self)
        self.models = Models(self)
        self.playground = Playground(self)

    def __enter__(self) -> Juru:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def send(self, call: calls.Call[T]) -> T:
        """Send `call` (again on a retryable failure) and read its answer."""
        for attempt in Retrying(**retry_policy(call, self.max_retries)):
            with attempt:
                return read(call, self._response(call))
        raise AssertionError("unreachable: tenacity re-raises the last failure")

    def _response(self, call: calls.Call[Any]) -> httpx.Response:
        try:
            return self.http.request(call.method, call.path, **request_options(call))
        except httpx.TransportError as error:
            raise connection_error(error, self.base_url) from error

    def account(self) -> Account:
        return self.send(calls.get_account())

    def usage(self, since: date | str | None = None, until: date | str | None = None) -> Usage:
        """Spend per day, source and model between two days (the server's default: 30 days)."""
        return self.send(calls.get_usage(since, until))


class Pager(Generic[T]):
    """Every item of a list, one page at a time as the iteration needs them."""

    def __init__(self, fetch: Callable[[str | None], Page[T]]) -> None:
        self._fetch = fetch

    def __iter__(self) -> Iterator[T]:
        after: str | None = None
        while True:
            page = self._fetch(after)
            yield from page.data
            if not page.has_more or page.next_cursor is None:
                return
            after = page.next_cursor

    def page(self, after: str | None = None) -> Page[T]:
        """One page, after the cursor given."""
        return self._fetch(after)


class Resource:
    def __init__(self, client: Juru) -> None:
        self._client = client


class Agents(Resource):
    def create(
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
        return self._client.send(calls.create_agent(body))

    def get(self, agent_id: str) -> Agent:
        return self._client.send(calls.get_agent(agent_id))

    def list(self, *, limit: int | None = None) -> Pager[Agent]:
        return Pager(lambda after: self._client.send(calls.list_agents(limit, after)))

    def update(
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
        return self._client.send(calls.update_agent(agent_id, body))

    def delete(self, agent_id: str) -> Deleted:
        return self._client.send(calls.delete_agent(agent_id))


class Threads(Resource):
    def create(
        self, agent_id: str, *, title: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> Thread:
        return self._client.send(calls.create_thread(agent_id, title, metadata))

    def get(self, thread_id: str) -> Thread:
        return self._client.send(calls.get_thread(thread_id))

    def list(self, agent_id: str, *, limit: int | None = None) -> Pager[Thread]:
        return Pager(lambda after: self._client.send(calls.list_threads(agent_id, limit, after)))

    def messages(self, thread_id: str, *, limit: int | None = None) -> Pager[Message]:
        return Pager(lambda after: self._client.send(calls.list_messages(thread_id, limit, after)))


class Runs(Resource):
    def create(
        self,
        thread_id: str,
        input: calls.RunInput,
        *,
        idempotency_key: str | None = None,
        wait: float | None = None,
    ) -> Run:
        """A new run; with `wait` (at most 30 s), as soon as it needs tool outputs or has
        ended."""
        return self._client.send(calls.create_run(thread_id, input, idempotency_key, wait))

    def get(self, run_id: str, *, wait: float | None = None) -> Run:
        """The run; with `wait` (at most 30 s), as soon as it needs tool outputs or has ended."""
        return self._client.send(calls.get_run(run_id, wait))

    def list(
        self,
        thread_id: str | None = None,
        *,
        parent_run_id: str | None = None,
        limit: int | None = None,
    ) -> Pager[Run]:
        """A thread's runs; without a thread, the account's (with `parent_run_id`, the child
        runs that run started)."""
        return Pager(
            lambda after: self._client.send(calls.list_runs(thread_id, limit, after, parent_run_id))
        )

    def cancel(self, run_id: str) -> Run:
        return self._client.send(calls.cancel_run(run_id))

    def submit_tool_outputs(
        self, run_id: str, outputs: Sequence[Mapping[str, str]], *, wait: float | None = None
    ) -> Run:
        """`outputs`: `[{"tool_call_id": ..., "output": ...}]`, one per pending call. With
        `wait` (at most 30 s), the run as soon as it needs tool outputs again or has ended."""
        return self._client.send(calls.submit_tool_outputs(run_id, outputs, wait))

    def events(self, run_id: str, *, after: int | None = None) -> Iterator[RunEvent]:
        """The run's events after `after` on one connection, until the run ends; a dropped
        connection raises `APIConnectionError` (`stream` resumes instead)."""
        yield from self._events_once(run_id, StreamProgress(after))

    def stream(self, run_id: str, *, after: int | None = None) -> Iterator[RunEvent]:
        """The run's events after `after` until it ends. A dropped connection is opened again
        from the last event's id, so no event is lost or repeated."""
        progress = StreamProgress(after)
        for attempt in Retrying(**reconnect_policy(progress, self._client.max_retries)):
            with attempt:
                yield from self._events_once(run_id, progress)
                return

    def _events_once(self, run_id: str, progress: StreamProgress) -> Iterator[RunEvent]:
        http, path = self._client.http, calls.events_path(run_id)
        try:
            with connect_sse(http, "GET", path, headers=progress.headers()) as source:
                response = source.response
                if response.status_code == 204:  # ended, nothing after the last id
                    progress.ended = True
                    return
                if response.is_error or not is_event_stream(response):
                    response.read()
                    raise error_from_response(response)
                for sse in source.iter_sse():
                    if not sse.data:  # a heartbeat comment (httpx-sse yields it)
                        continue
                    event = event_of(sse, progress)
                    yield event
                    if progress.ended:
                        return
        except httpx.TransportError as error:
            raise connection_error(error, self._client.base_url) from error
        progress.closed_early()

    def run_until_done(
        self,
        thread_id: str,
        input: calls.RunInput,
        *,
        tools: Mapping[str, tools_.ToolFunction] | None = None,
        stream: bool = True,
    ) -> Run:
        """Start a run and see it to its end: each pending tool call is answered by the
        function of the same name in `tools` (sync or async; its arguments parsed from the
        model's JSON; an exception is sent back as an error output). A call to a tool that is
        not in `tools` raises `UnknownToolError` before anything is submitted. The run is
        followed on its event stream, or with `?wait=` long polls when `stream=False` or the
        server has no stream."""
        functions = dict(tools or {})
        if not stream:
            run = self.create(thread_id, input, wait=calls.MAX_WAIT_SECONDS)
            return self._poll_to_end(run, functions)
        run = self.create(thread_id, input)
        try:
            return self._follow_to_end(run, functions)
        except StreamsUnavailable:
            return self._poll_to_end(run, functions)

    def _follow_to_end(self, run: Run, functions: Mapping[str, tools_.ToolFunction]) -> Run:
        latest = run
        try:
            for event in self.stream(run.id):
                if event.run is None:
                    continue
                latest = event.run
                if latest.status == "requires_action":
                    self._answer(latest, functions)
        except NotFoundError as error:
            raise StreamsUnavailable() from error
        return latest

    def _poll_to_end(self, run: Run, functions: Mapping[str, tools_.ToolFunction]) -> Run:
        while not run.is_terminal:
            if run.status == "requires_action":
                run = self._answer(run, functions, wait=calls.MAX_WAIT_SECONDS)
            else:
                run = self.get(run.id, wait=calls.MAX_WAIT_SECONDS)
        return run

    def _answer(
        self, run: Run, functions: Mapping[str, tools_.ToolFunction], wait: float | None = None
    ) -> Run:
        pending = run.pending_tool_calls or []
        tools_.check_known(pending, functions, run.id)
        outputs = [tools_.output(call, self._call(call, functions)) for call in pending]
        return self.submit_tool_outputs(run.id, outputs, wait=wait)

    @staticmethod
    def _call(call: ToolCall, functions: Mapping[str, tools_.ToolFunction]) -> str:
        return tools_.run_blocking(functions[call.name], call)[0]


class StreamsUnavailable(Exception):
    """The server has no event stream for runs: follow with `?wait=` instead."""


class Files(Resource):
    def list(self, *, limit: int | None = None) -> Pager[File]:
        """The account's files (audio made by `text_to_speech`), newest first."""
        return Pager(lambda after: self._client.send(calls.list_files(limit, after)))

    def get(self, file_id: str) -> File:
        return self._client.send(calls.get_file(file_id))

    def content(self, file_id: str) -> bytes:
        return self._client.send(calls.file_content(file_id))


class Documents(Resource):
    def upload(
        self,
        file: Path | str | bytes,
        *,
        filename: str | None = None,
        title: str | None = None,
        content_type: str | None = None,
    ) -> Document:
        """Add a `.txt`, `.md` or `.pdf` file (a path, or bytes with a `filename`)."""
        return self._client.send(calls.upload_document(file, filename, title, content_type))

    def list(self, *, limit: int | None = None) -> Pager[Document]:
        return Pager(lambda after: self._client.send(calls.list_documents(limit, after)))

    def get(self, document_id: str) -> Document:
        return self._client.send(calls.get_document(document_id))

    def delete(self, document_id: str) -> Deleted:
        return self._client.send(calls.delete_document(document_id))


class Models(Resource):
    def list(self) -> list[Model]:
        return self._client.send(calls.list_models())

    def get(self, model_id: str) -> Model:
        return self._client.send(calls.get_model(model_id))


class Playground(Resource):
    """The playground's features (no key needed; the server must have it on)."""

    def features(self) -> list[dict[str, Any]]:
        return self._client.send(calls.playground_features())

    def stream(
        self, feature: str, message: str, *, thread_id: str | None = None
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """A turn as `(event, data)` pairs: `step`, `text`, then `turn` (or `error`)."""
        body = calls.playground_body(feature, thread_id, message=message)
        yield from self._turn("/playground/messages/stream", body)

    def resume(
        self, feature: str, thread_id: str, value: Any
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """A paused turn resumed with `value` (review decisions: `{"decisions": [...]}`)."""
        body = calls.playground_body(feature, thread_id, value=value)
        yield from self._turn("/playground/resume/stream", body)

    def _turn(self, path: str, body: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        try:
            with connect_sse(self._client.http, "POST", path, json=body) as source:
                if source.response.is_error:
                    source.response.read()
                    raise error_from_response(source.response)
                for sse in source.iter_sse():
                    yield sse.event, sse.json()
        except httpx.TransportError as error:
            raise connection_error(error, self._client.base_url) from error
