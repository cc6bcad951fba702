"""Every `/v1` and playground operation as a `Call`: the request to send and how to read its
answer. The sync and async clients (`_sync.py`, `_async.py`) only send them."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

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
    Thread,
    Usage,
)

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
MAX_WAIT_SECONDS = 30.0


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    read: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    json: Any = None
    files: Any = None
    data: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def safe_to_repeat(self) -> bool:
        """Whether sending it twice does no harm: reads, deletes and keyed creates."""
        return self.method in {"GET", "DELETE"} or "Idempotency-Key" in self.headers


def model(kind: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: kind.model_validate_json(response.content)


def page_of(kind: type[M]) -> Callable[[httpx.Response], Page[M]]:
    adapter = _page_adapter(kind)
    return lambda response: adapter.validate_json(response.content)


@functools.cache
def _page_adapter(kind: type[BaseModel]) -> TypeAdapter[Any]:
    """Built once per model: every list call used to build (and compile) its own."""
    return TypeAdapter(Page[kind])  # type: ignore[valid-type]


def models_of(response: httpx.Response) -> list[Model]:
    return [Model.model_validate(item) for item in response.json()["data"]]


def content(response: httpx.Response) -> bytes:
    return response.content


def quoted(identifier: str) -> str:
    """A path segment: ids never hold `/`, but a caller's typo must not reach another route."""
    return quote(identifier, safe="")


def given(**values: Any) -> dict[str, Any]:
    """The keyword arguments that were given (not None)."""
    return {name: value for name, value in values.items() if value is not None}


def wait_params(wait: float | None) -> dict[str, Any]:
    """The `?wait=` of a call that can wait for a run, capped at the server's 30 s (none for 0)."""
    return given(wait=None if not wait else min(wait, MAX_WAIT_SECONDS))


def page_params(limit: int | None, after: str | None) -> dict[str, Any]:
    return given(limit=limit, after=after)


# --- agents --------------------------------------------------------------------------------------


def create_agent(body: Mapping[str, Any]) -> Call[Agent]:
    return Call("POST", "/v1/agents", model(Agent), json=dict(body))


def get_agent(agent_id: str) -> Call[Agent]:
    return Call("GET", f"/v1/agents/{quoted(agent_id)}", model(Agent))


def list_agents(limit: int | None, after: str | None) -> Call[Page[Agent]]:
    return Call("GET", "/v1/agents", page_of(Agent), params=page_params(limit, after))


def update_agent(agent_id: str, changes: Mapping[str, Any]) -> Call[Agent]:
    return Call("PATCH", f"/v1/agents/{quoted(agent_id)}", model(Agent), json=dict(changes))


def delete_agent(agent_id: str) -> Call[Deleted]:
    return Call("DELETE", f"/v1/agents/{quoted(agent_id)}", model(Deleted))


def agent_body(
    name: str | None,
    model_id: str | None,
    system_prompt: str | None,
    tools: Sequence[Mapping[str, Any]] | None,
    builtin_tools: Sequence[str] | None,
    max_steps: int | None,
    agent_tools: Sequence[Mapping[str, str]] | None = None,
    mcp_servers: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    return given(
        name=name,
        model_id=model_id,
        system_prompt=system_prompt,
        tools=None if tools is None else [dict(tool) for tool in tools],
        builtin_tools=None if builtin_tools is None else list(builtin_tools),
        agent_tools=None if agent_tools is None else [dict(tool) for tool in agent_tools],
        max_steps=max_steps,
        mcp_servers=None if mcp_servers is None else [dict(server) for server in mcp_servers],
    )


# --- threads and messages ------------------------------------------------------------------------


def create_thread(
    agent_id: str, title: str | None, metadata: Mapping[str, Any] | None
) -> Call[Thread]:
    body = given(title=title, metadata=None if metadata is None else dict(metadata))
    return Call("POST", f"/v1/agents/{quoted(agent_id)}/threads", model(Thread), json=body)


def get_thread(thread_id: str) -> Call[Thread]:
    return Call("GET", f"/v1/threads/{quoted(thread_id)}", model(Thread))


def list_threads(agent_id: str, limit: int | None, after: str | None) -> Call[Page[Thread]]:
    path = f"/v1/agents/{quoted(agent_id)}/threads"
    return Call("GET", path, page_of(Thread), params=page_params(limit, after))


def list_messages(thread_id: str, limit: int | None, after: str | None) -> Call[Page[Message]]:
    path = f"/v1/threads/{quoted(thread_id)}/messages"
    return Call("GET", path, page_of(Message), params=page_params(limit, after))


# --- runs ----------------------------------------------------------------------------------------

RunInput = str | Sequence[Mapping[str, str]]


def create_run(
    thread_id: str, input: RunInput, idempotency_key: str | None, wait: float | None = None
) -> Call[Run]:
    """A new run; the key (a fresh one when none is given) makes a retried create safe."""
    body = {"input": input if isinstance(input, str) else [dict(m) for m in input]}
    headers = {"Idempotency-Key": idempotency_key or f"juru-client-{uuid.uuid4().hex}"}
    params = wait_params(wait)
    path = f"/v1/threads/{quoted(thread_id)}/runs"
    return Call("POST", path, model(Run), json=body, headers=headers, params=params)


def get_run(run_id: str, wait: float | None) -> Call[Run]:
    params = wait_params(wait)
    return Call("GET", f"/v1/runs/{quoted(run_id)}", model(Run), params=params)


def list_runs(
    thread_id: str | None, limit: int | None, after: str | None, parent_run_id: str | None = None
) -> Call[Page[Run]]:
    """A thread's runs, or the account's (those `parent_run_id` started, when given)."""
    if thread_id is None:
        params = {**page_params(limit, after), **given(parent_run_id=parent_run_id)}
        return Call("GET", "/v1/runs", page_of(Run), params=params)
    path = f"/v1/threads/{quoted(thread_id)}/runs"
    return Call("GET", path, page_of(Run), params=page_params(limit, after))


def cancel_run(run_id: str) -> Call[Run]:
    return Call("POST", f"/v1/runs/{quoted(run_id)}/cancel", model(Run))


def submit_tool_outputs(
    run_id: str, outputs: Sequence[Mapping[str, str]], wait: float | None = None
) -> Call[Run]:
    body = {"outputs": [dict(output) for output in outputs]}
    params = wait_params(wait)
    path = f"/v1/runs/{quoted(run_id)}/tool_outputs"
    return Call("POST", path, model(Run), json=body, params=params)


def events_path(run_id: str) -> str:
    return f"/v1/runs/{quoted(run_id)}/events"


# --- the rest of /v1 -----------------------------------------------------------------------------


def list_models() -> Call[list[Model]]:
    return Call("GET", "/v1/models", models_of)


def get_model(model_id: str) -> Call[Model]:
    return Call("GET", f"/v1/models/{model_id}", model(Model))


def get_account() -> Call[Account]:
    return Call("GET", "/v1/account", model(Account))


def get_usage(since: date | str | None, until: date | str | None) -> Call[Usage]:
    params = given(**{"from": _day(since), "to": _day(until)})
    return Call("GET", "/v1/usage", model(Usage), params=params)


def _day(value: date | str | None) -> str | None:
    return value.isoformat() if isinstance(value, date) else value


def list_files(limit: int | None, after: str | None) -> Call[Page[File]]:
    return Call("GET", "/v1/files", page_of(File), params=page_params(limit, after))


def get_file(file_id: str) -> Call[File]:
    return Call("GET", f"/v1/files/{quoted(file_id)}", model(File))


def file_content(file_id: str) -> Call[bytes]:
    return Call("GET", f"/v1/files/{quoted(file_id)}/content", content)


def upload_document(
    file: Path | str | bytes, filename: str | None, title: str | None, content_type: str | None
) -> Call[Document]:
    if isinstance(file, bytes):
        data, name = file, filename or "document.txt"
    else:
        path = Path(file)
        data, name = path.read_bytes(), filename or path.name
    upload = (name, data, content_type) if content_type else (name, data)
    return Call(
        "POST",
        "/v1/documents",
        model(Document),
        files={"file": upload},
        data=given(title=title),
    )


def list_documents(limit: int | None, after: str | None) -> Call[Page[Document]]:
    return Call("GET", "/v1/documents", page_of(Document), params=page_params(limit, after))


def get_document(document_id: str) -> Call[Document]:
    return Call("GET", f"/v1/documents/{quoted(document_id)}", model(Document))


def delete_document(document_id: str) -> Call[Deleted]:
    return Call("DELETE", f"/v1/documents/{quoted(document_id)}", model(Deleted))


# --- the playground ------------------------------------------------------------------------------


def json_list(response: httpx.Response) -> list[dict[str, Any]]:
    body: list[dict[str, Any]] = response.json()
    return body


def playground_features() -> Call[list[dict[str, Any]]]:
    return Call("GET", "/playground/features", json_list)


def playground_body(feature: str, thread_id: str | None, **rest: Any) -> dict[str, Any]:
    return {"feature": feature, **given(thread_id=thread_id), **rest}
