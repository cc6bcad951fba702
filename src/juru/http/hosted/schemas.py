"""Request and response bodies of `/v1`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date, datetime
from decimal import Decimal
from typing import Annotated, Any, Generic, Literal, Self, TypeVar

from limits import RateLimitItem
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializerFunctionWrapHandler,
    computed_field,
    field_validator,
    model_serializer,
    model_validator,
)

from juru.core.states import RunStatus
from juru.hosted.agents import HEADER_MASK, masked_servers, parameters_problem
from juru.hosted.streams import StreamTicket
from juru.models.catalog import ModelSpec
from juru.store.pages import Page
from juru.store.records import AccountRecord, RunRecord, TranscriptMessage
from juru.store.usage import UsageLine
from juru.tools.mcp_servers import SERVER_NAME

TOOL_NAME = r"^[a-zA-Z0-9_-]{1,64}$"
MAX_TOOLS = 64
MAX_MCP_SERVERS = 8
HEADER_NAME = r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$"


def _money(value: Decimal) -> int | float:
    return int(value) if value == value.to_integral_value() else float(value)


Rupiah = Annotated[Decimal, PlainSerializer(_money, return_type=int | float)]


class _View(BaseModel):
    """A response object read from a record's attributes."""

    model_config = ConfigDict(from_attributes=True)

    @classmethod
    def of(cls, record: Any) -> Self:
        return cls.model_validate(record)


class _Body(BaseModel):
    # Strict: `0` is no boolean and `"5"` no number (what the description says is what passes).
    model_config = ConfigDict(extra="forbid", strict=True)


class FunctionIn(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    name: str = Field(pattern=TOOL_NAME)
    description: str | None = None
    parameters: dict[str, Any] | None = None

    @field_validator("parameters")
    @classmethod
    def _json_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        problem = None if value is None else parameters_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """A tool without a description or parameters is stored (and sent to providers) without
        them, never with `null`."""
        data: dict[str, Any] = handler(self)
        return {
            key: value
            for key, value in data.items()
            if value is not None or key not in ("description", "parameters")
        }


class ToolIn(_Body):
    type: Literal["function"]
    function: FunctionIn


class AgentToolIn(_Body):
    """Another agent of the account, offered to the model as a tool taking `{"input": "..."}`."""

    agent_id: str = Field(min_length=1, max_length=40, examples=["agt_..."])
    name: str = Field(pattern=TOOL_NAME)
    description: str = Field(default="", max_length=4_000)


class McpServerIn(_Body):
    """A Streamable HTTP MCP server whose tools the agent uses, or (with no `url`) a server
    the operator defined, by name."""

    name: str = Field(pattern=SERVER_NAME, description="Also the prefix of its tools' names.")
    url: str | None = Field(
        default=None,
        max_length=2000,
        pattern=r"^https?://",
        description="The server's MCP endpoint; leave it out to use the operator's server "
        "of this name.",
        examples=["https://tools.example.com/mcp"],
    )
    headers: dict[str, str] | None = Field(
        default=None,
        max_length=20,
        description=f"Sent with every request (e.g. Authorization). Shown as {HEADER_MASK!r}; "
        f"send {HEADER_MASK!r} back to keep a stored value.",
    )
    allowed_tools: list[str] | None = Field(
        default=None,
        max_length=128,
        description="The server's tools the agent may use (default: all).",
    )

    @field_validator("headers")
    @classmethod
    def _header_fields(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name, header in (value or {}).items():
            if not re.fullmatch(HEADER_NAME, name):
                raise ValueError(f"{name!r} is not an HTTP header name")
            if len(header) > 4096 or any(c in header for c in "\r\n\0"):
                raise ValueError(
                    f"the value of {name!r} must be one line of at most 4096 characters"
                )
        return value

    @field_validator("allowed_tools")
    @classmethod
    def _tool_names(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not name or len(name) > 128 for name in value):
            raise ValueError("tool names are 1 to 128 characters")
        return value


class AgentIn(_Body):
    name: str = Field(min_length=1, max_length=200)
    model_id: str = Field(min_length=1, max_length=200, examples=["juru/demo"])
    system_prompt: str = Field(default="", max_length=100_000)
    tools: list[ToolIn] = Field(default_factory=list, max_length=MAX_TOOLS)
    builtin_tools: list[str] = Field(default_factory=list)
    agent_tools: list[AgentToolIn] = Field(
        default_factory=list,
        max_length=MAX_TOOLS,
        description="Agents the model may call as tools; each call is a child run.",
    )
    max_steps: int = Field(default=20, ge=1, le=40)
    mcp_servers: list[McpServerIn] = Field(default_factory=list, max_length=MAX_MCP_SERVERS)


def _unset(**constraints: Any) -> Any:
    """A PATCH field: absent means unchanged, and `null` is refused (the type is not nullable,
    so the published schema says so too)."""
    return Field(default=None, json_schema_extra=_without_default, **constraints)


def _without_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


class AgentPatch(_Body):
    name: str = _unset(min_length=1, max_length=200)
    model_id: str = _unset(min_length=1, max_length=200)
    system_prompt: str = _unset(max_length=100_000)
    tools: list[ToolIn] = _unset(max_length=MAX_TOOLS)
    builtin_tools: list[str] = _unset()
    agent_tools: list[AgentToolIn] = _unset(max_length=MAX_TOOLS)
    max_steps: int = _unset(ge=1, le=40)
    mcp_servers: list[McpServerIn] = _unset(max_length=MAX_MCP_SERVERS)


class ThreadIn(_Body):
    title: str | None = Field(default=None, max_length=500)
    metadata: dict[str, Any] | None = None


class InputMessage(_Body):
    role: Literal["user", "assistant", "system"]
    content: str


class RunIn(_Body):
    input: str | list[InputMessage]
    stream: bool = Field(
        default=False,
        description="Answer `200 text/event-stream` with the run's events from the first "
        "(the run's id is in the first `run.status`) instead of `202` with the run.",
    )

    def messages(self) -> list[dict[str, str]]:
        if isinstance(self.input, str):
            return [{"role": "user", "content": self.input}]
        return [message.model_dump() for message in self.input]

    @model_validator(mode="after")
    def _not_empty(self) -> RunIn:
        if isinstance(self.input, str) and not self.input.strip():
            raise ValueError("input must not be empty")
        if isinstance(self.input, list) and not self.input:
            raise ValueError("input must hold at least one message")
        return self


class ToolOutputIn(_Body):
    tool_call_id: str
    output: str


class ToolOutputsIn(_Body):
    outputs: list[ToolOutputIn] = Field(min_length=1)


def _absent(value: object) -> bool:
    return value is None


def _none_as_empty(value: object) -> object:
    return [] if value is None else value


class FunctionOut(BaseModel):
    """A client tool's function as it was defined (extra keys such as `strict` are kept)."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str | None = Field(default=None, exclude_if=_absent)
    parameters: dict[str, Any] | None = Field(default=None, exclude_if=_absent)


class ToolOut(BaseModel):
    type: Literal["function"]
    function: FunctionOut


class AgentToolOut(BaseModel):
    agent_id: str
    name: str
    description: str = ""


class McpServerOut(BaseModel):
    name: str
    url: str | None = Field(default=None, exclude_if=_absent)
    headers: dict[str, str] | None = Field(
        default=None, exclude_if=_absent, description=f"Values shown as {HEADER_MASK!r}."
    )
    allowed_tools: list[str] | None = Field(default=None, exclude_if=_absent)


class AgentOut(_View):
    id: str
    name: str
    model_id: str
    system_prompt: str
    tools: list[ToolOut]
    builtin_tools: list[str]
    agent_tools: Annotated[list[AgentToolOut], BeforeValidator(_none_as_empty)]
    max_steps: int
    mcp_servers: list[McpServerOut] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _masked(cls, value: Any) -> Any:
        return masked_servers(value)


class ThreadOut(_View):
    id: str
    agent_id: str
    title: str | None
    metadata: dict[str, Any] | None
    created_at: datetime


class PendingToolCall(BaseModel):
    id: str
    name: str
    arguments: str
    run_id: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="Present when the call is a child run's (an agent called as a tool): "
        "answer it on this run all the same.",
    )


class RunOut(BaseModel):
    """The run view; `output` is present only once the run succeeded."""

    id: str
    thread_id: str
    agent_id: str
    parent_run_id: str | None = Field(
        default=None, description="The run that started this one by calling its agent as a tool."
    )
    status: RunStatus
    step_count: int
    max_steps: int
    cost_rupiah: Rupiah
    pending_tool_calls: list[PendingToolCall] | None
    error: str | None
    created_at: datetime
    updated_at: datetime
    output: str | None = Field(
        default=None, exclude_if=_absent, description="The answer, once the run succeeded."
    )

    @classmethod
    def of(cls, run: RunRecord | Mapping[str, Any]) -> RunOut:
        """The view of a run record, or of the run's columns a `run.status` event keeps."""
        view = cls.model_validate(run, from_attributes=True)
        if view.status != RunStatus.SUCCEEDED:
            view.output = None
        return view


class MessageOut(BaseModel):
    id: str
    thread_id: str
    run_id: str | None
    role: Literal["user", "assistant", "system", "tool"]
    content: str
    tool_calls: list[PendingToolCall] | None
    tool_call_id: str | None
    name: str | None
    created_at: datetime
    depth: int | None = Field(
        default=None,
        exclude_if=_absent,
        description="In a run's stream only: a message of a run below the followed one (1: a "
        "child run, 2: a grandchild), `run_id` naming it.",
    )

    @classmethod
    def of(cls, message: TranscriptMessage) -> MessageOut:
        return cls(
            id=message.message_id,
            thread_id=message.thread_id,
            run_id=message.run_id,
            role=message.role,
            content=message.content,
            tool_calls=message.tool_calls,
            tool_call_id=message.tool_call_id,
            name=message.name,
            created_at=message.created_at,
        )


class StreamTokenOut(BaseModel):
    """Reads one run's event stream without an Authorization header, until `expires_at`."""

    token: str
    expires_at: datetime
    url: str = Field(description="The stream's path with the token: `new EventSource(url)`.")

    @classmethod
    def of(cls, ticket: StreamTicket) -> StreamTokenOut:
        return cls(token=ticket.token, expires_at=ticket.expires_at, url=ticket.url)


class StepEventOut(BaseModel):
    """`step.completed`: a model step of the run finished."""

    step_count: int
    cost_rupiah: Rupiah = Field(description="The run's running cost after this step.")
    run_id: str | None = Field(
        default=None,
        exclude_if=_absent,
        description="A step of a run below the followed one (an agent it called): that run.",
    )
    depth: int | None = Field(
        default=None,
        exclude_if=_absent,
        description="How far below the followed run the step's run is (1: a child run).",
    )


class MessageDeltaOut(BaseModel):
    """`message.delta` (not stored, no id): a piece of a message's text as the model writes it;
    the message's `message.completed` holds the whole text."""

    message_id: str
    delta: str


T = TypeVar("T")


class ListOut(BaseModel, Generic[T]):
    object: Literal["list"] = "list"
    data: list[T]
    has_more: bool
    next_cursor: str | None

    @classmethod
    def of(cls, page: Page[Any], items: list[T], cursor_of: Any) -> Self:
        cursor = cursor_of(page.items[-1]) if page.has_more and page.items else None
        return cls(data=items, has_more=page.has_more, next_cursor=cursor)


class ModelOut(BaseModel):
    """A catalog model, in OpenAI's model shape with Juru's prices added."""

    id: str
    object: Literal["model"] = "model"
    created: int = Field(description="When the catalog entry was made (Unix seconds).")
    owned_by: str = Field(description="The provider, e.g. `openai` or `juru`.")
    label: str
    input_rupiah_per_million: Rupiah
    output_rupiah_per_million: Rupiah
    agents: bool = Field(description="Whether the model may drive hosted agents.")
    max_output_tokens: int = Field(
        description="The most tokens one reply can have; a paid call holds their price."
    )

    @classmethod
    def of(cls, model: ModelSpec) -> ModelOut:
        return cls(
            max_output_tokens=model.max_output_tokens,
            id=model.id,
            created=model.created,
            owned_by=model.provider,
            label=model.label,
            input_rupiah_per_million=model.input_rupiah_per_million,
            output_rupiah_per_million=model.output_rupiah_per_million,
            agents=model.agents,
        )


class ModelListOut(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelOut]


class RateLimitOut(BaseModel):
    limit: str = Field(description="In the `limits` notation, e.g. `120/minute`.")
    requests: int
    window_seconds: int


class AccountOut(BaseModel):
    """The account behind the API key: its balance, and what paid calls in flight hold."""

    id: str
    object: Literal["account"] = "account"
    name: str
    tier: str
    balance_rupiah: Rupiah
    held_rupiah: Rupiah = Field(
        description="Set aside for paid calls in flight: the most each can cost, until it "
        "returns and is charged what it really cost."
    )
    available_rupiah: Rupiah = Field(
        description="`balance_rupiah` less `held_rupiah`: what new paid calls may hold."
    )
    rate_limit: RateLimitOut
    created_at: datetime

    @classmethod
    def of(cls, account: AccountRecord, limit: RateLimitItem) -> AccountOut:
        return cls(
            id=account.id,
            name=account.name,
            tier=account.tier,
            balance_rupiah=account.balance_rupiah,
            held_rupiah=account.held_rupiah,
            available_rupiah=account.balance_rupiah - account.held_rupiah,
            rate_limit=RateLimitOut(
                limit=f"{limit.amount}/{limit.multiples} {limit.GRANULARITY.name}"
                if limit.multiples != 1
                else f"{limit.amount}/{limit.GRANULARITY.name}",
                requests=limit.amount,
                window_seconds=limit.get_expiry(),
            ),
            created_at=account.created_at,
        )


class DeletedOut(BaseModel):
    id: str
    deleted: Literal[True] = True


class UsageLineOut(_View):
    day: date
    source: str
    model_id: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_rupiah: Rupiah


class UsageOut(BaseModel):
    object: Literal["usage"] = "usage"
    data: list[UsageLineOut]
    total_rupiah: Rupiah

    @classmethod
    def of(cls, lines: list[UsageLine]) -> UsageOut:
        return cls(
            data=[UsageLineOut.of(line) for line in lines],
            total_rupiah=sum((line.cost_rupiah for line in lines), Decimal(0)),
        )


class FileOut(_View):
    id: str
    object: Literal["file"] = "file"
    purpose: str
    filename: str
    content_type: str
    size_bytes: int
    duration_seconds: float | None
    run_id: str | None
    created_at: datetime

    @computed_field  # type: ignore[prop-decorator]
    @property
    def url(self) -> str:
        """Where the file's bytes are served."""
        return f"/v1/files/{self.id}/content"


class DocumentOut(_View):
    id: str
    object: Literal["document"] = "document"
    title: str
    filename: str | None
    content_type: str
    size_bytes: int
    characters: int
    chunk_count: int
    created_at: datetime


# Named pages, so the description shows `AgentList` rather than `ListOut_AgentOut_`.
class AgentList(ListOut[AgentOut]):
    pass


class ThreadList(ListOut[ThreadOut]):
    pass


class MessageList(ListOut[MessageOut]):
    pass


class RunList(ListOut[RunOut]):
    pass


class DocumentList(ListOut[DocumentOut]):
    pass


class FileList(ListOut[FileOut]):
    pass
