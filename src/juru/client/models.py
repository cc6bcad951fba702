"""The API's objects as typed models, field for field as the server's OpenAPI description has
them (`tests/integration/test_client_models.py` compares the two). Unknown fields a newer
server adds are kept (`extra="allow"`), so an old client still reads a new server."""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict

T = TypeVar("T")
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "expired", "cancelled"})
RunStatus = Literal[
    "queued", "running", "requires_action", "succeeded", "failed", "expired", "cancelled"
]


class ApiObject(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Function(ApiObject):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class Tool(ApiObject):
    type: Literal["function"] = "function"
    function: Function


class AgentTool(ApiObject):
    """Another agent the model may call as a tool (each call is a child run)."""

    agent_id: str
    name: str
    description: str = ""


class McpServer(ApiObject):
    """An MCP server whose tools an agent uses; header values come back as `***`."""

    name: str
    url: str | None = None
    headers: dict[str, str] | None = None
    allowed_tools: list[str] | None = None


class Agent(ApiObject):
    id: str
    name: str
    model_id: str
    system_prompt: str
    tools: list[Tool]
    builtin_tools: list[str]
    agent_tools: list[AgentTool]
    max_steps: int
    mcp_servers: list[McpServer] = []
    created_at: datetime
    updated_at: datetime


class Thread(ApiObject):
    id: str
    agent_id: str
    title: str | None
    metadata: dict[str, Any] | None
    created_at: datetime


class ToolCall(ApiObject):
    """A call the model made: `arguments` is the JSON text the model wrote."""

    id: str
    name: str
    arguments: str
    # The child run whose call this is, when an agent called by the run made it.
    run_id: str | None = None


class Message(ApiObject):
    id: str
    thread_id: str
    run_id: str | None
    role: str
    content: str
    tool_calls: list[ToolCall] | None
    tool_call_id: str | None
    name: str | None
    created_at: datetime
    # In a run's stream: a message of a run below the followed one (1: a child run).
    depth: int | None = None


class Run(ApiObject):
    id: str
    thread_id: str
    agent_id: str
    status: RunStatus
    parent_run_id: str | None = None
    step_count: int
    max_steps: int
    cost_rupiah: Decimal
    pending_tool_calls: list[ToolCall] | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    output: str | None = None

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class Model(ApiObject):
    id: str
    object: str = "model"
    created: int
    owned_by: str
    label: str
    input_rupiah_per_million: Decimal
    output_rupiah_per_million: Decimal
    agents: bool
    max_output_tokens: int


class RateLimit(ApiObject):
    limit: str
    requests: int
    window_seconds: int


class Account(ApiObject):
    id: str
    object: str = "account"
    name: str
    tier: str
    balance_rupiah: Decimal
    held_rupiah: Decimal
    available_rupiah: Decimal
    rate_limit: RateLimit
    created_at: datetime


class UsageLine(ApiObject):
    day: str
    source: str
    model_id: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_rupiah: Decimal


class Usage(ApiObject):
    object: str = "usage"
    data: list[UsageLine]
    total_rupiah: Decimal


class Document(ApiObject):
    id: str
    object: str = "document"
    title: str
    filename: str | None
    content_type: str
    size_bytes: int
    characters: int
    chunk_count: int
    created_at: datetime


class File(ApiObject):
    id: str
    object: str = "file"
    purpose: str
    filename: str
    content_type: str
    size_bytes: int
    duration_seconds: float | None
    run_id: str | None
    created_at: datetime
    url: str


class Deleted(ApiObject):
    id: str
    deleted: bool = True


class Page(ApiObject, Generic[T]):
    """One page of a list; `next_cursor` is the `after` of the next page."""

    object: str = "list"
    data: list[T]
    has_more: bool
    next_cursor: str | None


# --- a run's events (GET /v1/runs/{id}/events) ------------------------------------------------


class StepCompleted(ApiObject):
    step_count: int
    cost_rupiah: Decimal
    # A step of a run below the followed one (an agent it called), and how far below.
    run_id: str | None = None
    depth: int | None = None


class MessageDelta(ApiObject):
    message_id: str
    delta: str


class RunEvent(BaseModel):
    """One event of a run's stream. Durable events (`run.status`, `message.completed`,
    `step.completed`) have an `id` (1, 2, 3, ... per run); `message.delta` has none."""

    model_config = ConfigDict(frozen=True)

    type: str
    id: int | None
    data: Run | Message | StepCompleted | MessageDelta | dict[str, Any]

    @property
    def run(self) -> Run | None:
        return self.data if isinstance(self.data, Run) else None


EVENT_DATA: dict[str, type[ApiObject]] = {
    "run.status": Run,
    "message.completed": Message,
    "step.completed": StepCompleted,
    "message.delta": MessageDelta,
}


def parse_event(event_type: str, event_id: str, data: str) -> RunEvent:
    """An SSE event as the typed event; an event type this client does not know keeps its data
    as a dict."""
    kind = EVENT_DATA.get(event_type)
    payload: Any = kind.model_validate_json(data) if kind else json.loads(data)
    durable = event_type != "message.delta" and event_id
    return RunEvent(type=event_type, id=int(event_id) if durable else None, data=payload)
