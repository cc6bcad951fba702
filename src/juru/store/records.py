"""The rows of the hosted-agents tables, as typed records."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from datetime import datetime
from decimal import Decimal
from typing import Any, Self

from sqlalchemy import RowMapping


class _Record:
    @classmethod
    def from_row(cls, row: RowMapping) -> Self:
        # A field with a default may be missing from the row (a column of some queries only).
        known = fields(cls)  # type: ignore[arg-type]
        found = [field.name for field in known if field.name in row or field.default is MISSING]
        return cls(**{name: row[name] for name in found})


@dataclass(frozen=True)
class AccountRecord(_Record):
    id: str
    name: str
    tier: str
    balance_rupiah: Decimal
    held_rupiah: Decimal
    created_at: datetime


@dataclass(frozen=True)
class AgentRecord(_Record):
    id: str
    account_id: str
    name: str
    model_id: str
    system_prompt: str
    tools: list[dict[str, Any]]
    builtin_tools: list[str]
    max_steps: int
    created_at: datetime
    updated_at: datetime
    revision: int = 1
    # `[{"name", "url"?, "headers"?, "allowed_tools"?}]`; None when the agent names none.
    mcp_servers: list[dict[str, Any]] | None = None
    # The agents this one may call as tools (NULL in the row: none).
    agent_tools: list[dict[str, str]] | None = None


@dataclass(frozen=True)
class ThreadRecord(_Record):
    id: str
    account_id: str
    agent_id: str
    title: str | None
    metadata: dict[str, Any] | None
    created_at: datetime


@dataclass(frozen=True)
class RunRecord(_Record):
    id: str
    account_id: str
    thread_id: str
    agent_id: str
    status: str
    step_count: int
    max_steps: int
    cost_rupiah: Decimal
    input: list[dict[str, str]]
    output: str | None
    error: str | None
    pending_tool_calls: list[dict[str, str]] | None
    pause_count: int
    tool_outputs: dict[str, str] | None
    idempotency_key: str | None
    lease_owner: str | None
    lease_expires_at: datetime | None
    attempts: int
    active_seconds: float
    active_since: datetime | None
    deadline_at: datetime | None
    waiting_since: datetime | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    # Read with the claim: the agent's `revision` (None once deleted) and its account's tier,
    # so a worker that knows that revision of the agent reads nothing more.
    agent_revision: int | None = None
    account_tier: str | None = None
    idempotency_body_hash: str | None = None
    next_prompt_bytes: int | None = None
    next_model_id: str | None = None
    hold_id: str | None = None
    hold_rupiah: Decimal | None = None
    parent_run_id: str | None = None
    last_worker: str | None = None


@dataclass(frozen=True)
class TranscriptMessage(_Record):
    thread_id: str
    position: int
    message_id: str
    run_id: str | None
    role: str
    content: str
    tool_calls: list[dict[str, str]] | None
    tool_call_id: str | None
    name: str | None
    created_at: datetime


@dataclass(frozen=True)
class FileRecord(_Record):
    id: str
    account_id: str
    run_id: str | None
    purpose: str
    filename: str
    content_type: str
    size_bytes: int
    duration_seconds: float | None
    storage_key: str
    created_at: datetime


@dataclass(frozen=True)
class DocumentRecord(_Record):
    id: str
    account_id: str
    title: str
    filename: str | None
    content_type: str
    size_bytes: int
    characters: int
    chunk_count: int
    created_at: datetime
