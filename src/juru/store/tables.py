"""Juru's own tables (LangGraph's checkpointer keeps its tables to itself)."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    CheckConstraint,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    text,
)

from juru.store.types import Money, UtcDateTime

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(column_0_label)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

playground_threads = Table(
    "playground_threads",
    metadata,
    Column("thread_id", String(200), primary_key=True),
    Column("feature", String(200), nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("updated_at", UtcDateTime(), nullable=False),
)

ACTIVE_RUN_STATUSES = ("queued", "running", "requires_action")
RUN_STATUSES = (*ACTIVE_RUN_STATUSES, "succeeded", "failed", "expired", "cancelled")
_ACTIVE_SQL = "status IN ('queued', 'running', 'requires_action')"
_STATUS_SQL = "status IN ({})".format(", ".join(f"'{status}'" for status in RUN_STATUSES))

accounts = Table(
    "accounts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("tier", String(40), nullable=False),
    Column("balance_rupiah", Money(), nullable=False),
    # The sum of the account's `balance_holds`: what paid calls in flight may still cost.
    Column("held_rupiah", Money(), nullable=False, server_default="0"),
    Column("created_at", UtcDateTime(), nullable=False),
)

# The most one paid call in flight can cost, set aside until the call is settled (or, if its
# process died, until `expires_at`).
balance_holds = Table(
    "balance_holds",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("amount_rupiah", Money(), nullable=False),
    # The model or built-in tool the hold is for.
    Column("what", String(200), nullable=False),
    Column("run_id", String(40), nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("expires_at", UtcDateTime(), nullable=False, index=True),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False, index=True),
    # What users see and revoke by; the key itself is kept only as its SHA-256.
    Column("prefix", String(40), nullable=False, unique=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("revoked_at", UtcDateTime(), nullable=True),
)

agents = Table(
    "agents",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("name", String(200), nullable=False),
    Column("model_id", String(200), nullable=False),
    Column("system_prompt", Text, nullable=False),
    Column("tools", JSON, nullable=False),
    Column("builtin_tools", JSON, nullable=False),
    Column("max_steps", Integer, nullable=False),
    # MCP servers whose tools the agent may call (NULL: none), and agents it may call as tools.
    Column("mcp_servers", JSON, nullable=True),
    Column("agent_tools", JSON, nullable=True),
    # 1 when created, one more at every edit (a claimed run names the revision it will run).
    Column("revision", Integer, nullable=False, server_default=text("1")),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("updated_at", UtcDateTime(), nullable=False),
)

threads = Table(
    "threads",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("agent_id", ForeignKey("agents.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("title", String(500), nullable=True),
    Column("metadata", JSON, nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
)

runs = Table(
    "runs",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("thread_id", ForeignKey("threads.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("agent_id", String(40), nullable=False),
    # The run that started this one as a tool call (agents calling agents), else NULL.
    Column("parent_run_id", String(40), nullable=True, index=True),
    Column("status", String(20), nullable=False),
    Column("step_count", Integer, nullable=False),
    Column("max_steps", Integer, nullable=False),
    Column("cost_rupiah", Money(), nullable=False),
    Column("input", JSON, nullable=False),
    Column("output", Text, nullable=True),
    Column("error", Text, nullable=True),
    Column("pending_tool_calls", JSON, nullable=True),
    Column("pause_count", Integer, nullable=False),
    Column("tool_outputs", JSON, nullable=True),
    Column("idempotency_key", String(255), nullable=True),
    # SHA-256 (hex) of the request that first used the key: a replay must match it.
    Column("idempotency_body_hash", String(64), nullable=True),
    # Set by the pause: what the next model call will send (its prompt's bytes, as the hold
    # counts them, before the tool outputs) and to which model.
    Column("next_prompt_bytes", Integer, nullable=True),
    Column("next_model_id", String(200), nullable=True),
    # A hold taken for the run's next call when its tool outputs were submitted; the worker
    # adopts it (or gives it back), and the step's write clears it.
    Column("hold_id", String(40), nullable=True),
    Column("hold_rupiah", Money(), nullable=True),
    Column("lease_owner", String(100), nullable=True),
    Column("lease_expires_at", UtcDateTime(), nullable=True),
    # The worker that claimed the run last, kept through a pause: the resume wakes it alone.
    Column("last_worker", String(100), nullable=True),
    Column("attempts", Integer, nullable=False),
    Column("active_seconds", Float, nullable=False),
    Column("active_since", UtcDateTime(), nullable=True),
    Column("deadline_at", UtcDateTime(), nullable=True),
    Column("waiting_since", UtcDateTime(), nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("updated_at", UtcDateTime(), nullable=False),
    Column("finished_at", UtcDateTime(), nullable=True),
    CheckConstraint(_STATUS_SQL, name="status"),
    UniqueConstraint("thread_id", "idempotency_key", name="uq_runs_thread_idempotency_key"),
    Index(
        "ux_runs_one_active_per_thread",
        "thread_id",
        unique=True,
        sqlite_where=text(_ACTIVE_SQL),
        postgresql_where=text(_ACTIVE_SQL),
    ),
    Index("ix_runs_status_lease", "status", "lease_expires_at"),
    Index("ix_runs_status_deadline", "status", "deadline_at"),
    Index("ix_runs_status_waiting", "status", "waiting_since"),
    Index("ix_runs_finished_at", "finished_at"),
)

# A message's position and an event's id are computed by their INSERT (`max + 1` of the thread or
# run): no RETURNING asks for them back (nothing reads them, and a step writes its rows in
# PostgreSQL's pipeline mode, where no result is read: `store.transactions.sent_together`).
thread_messages = Table(
    "thread_messages",
    metadata,
    Column("thread_id", ForeignKey("threads.id", ondelete="CASCADE"), primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("message_id", String(200), nullable=False),
    Column("run_id", String(40), nullable=True),
    Column("role", String(20), nullable=False),
    Column("content", Text, nullable=False),
    Column("tool_calls", JSON, nullable=True),
    Column("tool_call_id", String(200), nullable=True),
    Column("name", String(200), nullable=True),
    Column("created_at", UtcDateTime(), nullable=False),
    UniqueConstraint("thread_id", "message_id", name="uq_thread_messages_thread_message"),
    implicit_returning=False,
)

# Each run's durable event log (`GET /v1/runs/:id/events`): ids 1, 2, 3, ... per run, written in
# the transaction of the change each describes. `key` names an event that a step redone after a
# crash would write again (a message, a step): the second write is skipped.
run_events = Table(
    "run_events",
    metadata,
    Column("run_id", ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("type", String(40), nullable=False),
    Column("key", String(300), nullable=True),
    Column("data", JSON, nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
    UniqueConstraint("run_id", "key", name="uq_run_events_run_key"),
    implicit_returning=False,
)

usage_charges = Table(
    "usage_charges",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False),
    Column("source", String(20), nullable=False),
    Column("run_id", String(40), nullable=True, index=True),
    Column("step", Integer, nullable=True),
    Column("model_id", String(200), nullable=False),
    Column("input_tokens", Integer, nullable=False),
    Column("output_tokens", Integer, nullable=False),
    Column("list_cost_rupiah", Money(), nullable=False),
    Column("cost_rupiah", Money(), nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
    # Set where the same charge could be written twice (a model step redone after a crash).
    Column("charge_key", String(300), nullable=True, unique=True),
    Index("ix_usage_charges_account_created", "account_id", "created_at"),
)

runtime_sessions = Table(
    "runtime_sessions",
    metadata,
    Column("id", String(200), primary_key=True),
    Column("app_name", String(200), nullable=False),
    Column("user_id", String(200), nullable=False),
    Column("state", JSON, nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
    Column("updated_at", UtcDateTime(), nullable=False),
    Index("ix_runtime_sessions_owner", "app_name", "user_id", "id"),
)

files = Table(
    "files",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("run_id", String(40), nullable=True),
    Column("purpose", String(40), nullable=False),
    Column("filename", String(255), nullable=False),
    Column("content_type", String(100), nullable=False),
    Column("size_bytes", Integer, nullable=False),
    Column("duration_seconds", Float, nullable=True),
    # Where the bytes are in the file storage (`juru.files`); never shown to users.
    Column("storage_key", String(500), nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
)

documents = Table(
    "documents",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("account_id", ForeignKey("accounts.id", ondelete="CASCADE"), nullable=False, index=True),
    Column("title", String(500), nullable=False),
    Column("filename", String(255), nullable=True),
    Column("content_type", String(100), nullable=False),
    Column("size_bytes", Integer, nullable=False),
    Column("characters", Integer, nullable=False),
    Column("chunk_count", Integer, nullable=False),
    Column("created_at", UtcDateTime(), nullable=False),
)

# The integer key doubles as the SQLite FTS5 rowid (`document_chunks_fts`, made by migration
# 0006 with the triggers that keep it in step); PostgreSQL indexes `to_tsvector` instead.
document_chunks = Table(
    "document_chunks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("document_id", ForeignKey("documents.id", ondelete="CASCADE"), nullable=False),
    Column("account_id", String(40), nullable=False, index=True),
    Column("position", Integer, nullable=False),
    Column("content", Text, nullable=False),
    UniqueConstraint("document_id", "position", name="uq_document_chunks_document_position"),
)

# Full-text search objects the migrations make with raw SQL, outside this metadata (an FTS5
# virtual table and its shadow tables on SQLite, an expression GIN index on PostgreSQL).
SEARCH_INDEX = "ix_document_chunks_search"
SEARCH_TABLE = "document_chunks_fts"


def in_metadata(name: str | None, kind: str, _parents: object) -> bool:
    """Whether a database object belongs to this metadata (Alembic's `include_name`): the
    search objects above, the checkpointer's tables and FTS5's shadow tables do not."""
    if kind == "table":
        return name in metadata.tables
    return not (kind == "index" and name == SEARCH_INDEX)
