"""Settings: one pydantic-settings class, read from the environment and `.env`.

Nothing reads it at import time: `Settings()` is built by the CLI (or a test) and handed to
`create_app(settings)`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from dotenv import dotenv_values
from limits import parse_many
from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from juru.core.money import VolumeDiscount

DEFAULT_PLAYGROUND_ORIGINS = ("http://127.0.0.1:8001", "http://localhost:8001")
DEFAULT_TIER_RATE_LIMITS = {"paid": "120/minute", "corporate": "300/minute"}


def _comma_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class Settings(BaseSettings):
    """Every setting Juru reads; environment names are in each field's alias."""

    model_config = SettingsConfigDict(
        env_prefix="JURU_",
        env_file=".env",
        extra="ignore",
        populate_by_name=True,
    )

    database_url: str = "sqlite:///.juru/juru.db"
    default_model: str = "juru/demo"
    model_catalog: Path | None = None
    features: Annotated[list[str], NoDecode] = Field(default_factory=list)
    workers: int = Field(
        default=256,
        ge=0,
        le=10_000,
        description="Runs each worker process executes at once (a run waiting on a model costs "
        "little); 0 = API only, no workers.",
    )
    worker_processes: int | None = Field(
        default=None,
        ge=0,
        le=1024,
        description="Worker processes `juru serve` starts beside its API process: default one "
        "per CPU; 0 = run the workers inside the API process.",
    )
    worker_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="How far below the API process's CPU priority `juru serve` runs its worker "
        "processes (a nice increment): with every core busy executing runs, the API still "
        "answers first. 0 = the same priority.",
    )
    instance_name: str | None = Field(
        default=None,
        min_length=1,
        pattern=r"^[A-Za-z0-9._:-]+$",
        description="The stable name of this `juru serve`: its workers' leases carry it, so a "
        "restarted instance takes its runs back at once. Default `local` on SQLite, the host "
        "name on PostgreSQL.",
    )
    max_agent_depth: int = Field(
        default=3,
        ge=0,
        le=10,
        description="How deep agents may call agents as tools: a run's child is at depth 1, a "
        "grandchild at 2; a call past this depth is an error tool result, not a run.",
    )
    lease_seconds: float = Field(
        default=30.0,
        ge=1,
        description="How long a worker holds a run without renewing; a dead worker's run is "
        "taken over once its lease has expired.",
    )
    sqlite_busy_timeout_ms: int = Field(
        default=30_000,
        ge=0,
        description="How long a SQLite write waits for another connection's lock before it "
        "fails (runs then resume once the database can be written again).",
    )
    postgres_writers: int = Field(
        default=4,
        ge=1,
        le=256,
        description="Connections each process writes to PostgreSQL with, each in a thread that "
        "runs one write transaction at a time; writes beyond them wait in the process. More "
        "only pays where the database is far away or has many more cores (deployment.md).",
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, validation_alias=AliasChoices("PORT", "JURU_PORT"))
    playground_enabled: bool = Field(
        default=False, validation_alias=AliasChoices("PLAYGROUND_ENABLED", "playground_enabled")
    )
    playground_durability: Literal["exit", "async", "sync"] = Field(
        default="exit",
        description="When a playground turn saves its thread's checkpoint: `exit` once, when "
        "the turn answers, pauses for review or fails (a turn is all or nothing: a server that "
        "dies in the middle of one leaves the thread as the last turn left it); `async` or "
        "`sync` after every step as well, as LangGraph does by default "
        "(docs/playground.md#when-a-turn-is-saved).",
    )
    playground_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_PLAYGROUND_ORIGINS),
        validation_alias=AliasChoices("PLAYGROUND_ORIGINS", "playground_origins"),
    )
    local_account_balance: Decimal = Field(
        default=Decimal(100_000),
        ge=0,
        description="Opening balance (Rupiah) of the `local` account a fresh SQLite install "
        "makes, so built-in tools and a first paid call work before any top-up.",
    )
    tier_rate_limits: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_TIER_RATE_LIMITS),
        description="Requests allowed per account tier, in the `limits` notation "
        "(`120/minute`); the keys are the tiers accounts may have.",
    )
    key_cache_seconds: float = Field(
        default=1.0,
        ge=0,
        le=60,
        description="How long a process trusts an API key it has just looked up; a key revoked "
        "by another process stops working here within this many seconds (0: look up every "
        "request).",
    )
    rate_limit_storage: str = Field(
        default="memory://",
        description="Where rate-limit windows are counted: `memory://` (one process) or "
        "`redis://host:port` (replicas share one budget per account).",
    )
    tier_discounts: dict[str, Decimal] = Field(
        default_factory=dict,
        description='Package discount in percent per tier, e.g. {"corporate": 10}.',
    )
    volume_discounts: list[VolumeDiscount] = Field(
        default_factory=list,
        description="Percent off once an account's list-price spend this month reaches a "
        'threshold: [{"monthly_spend_rupiah": 1000000, "percent": 5}].',
    )
    hold_seconds: float = Field(
        default=3600.0,
        gt=0,
        description="How long a balance hold taken before a paid call lasts when its process "
        "dies before settling it; then the reaper gives it back. Longer than any model call.",
    )
    run_events_days: float = Field(
        default=30.0,
        gt=0,
        description="How long a finished run's event log (`GET /v1/runs/:id/events`) is kept; "
        "then the reaper deletes it (the run itself stays).",
    )
    stream_heartbeat_seconds: float = Field(
        default=15.0,
        gt=0,
        le=300,
        description="How often an open event stream with nothing to send writes a comment line, "
        "so that proxies and clients know it is alive.",
    )
    keep_alive_seconds: int = Field(
        default=75,
        ge=1,
        le=3600,
        description="How long `juru serve` keeps an idle HTTP connection open for its next "
        "request. Longer than the idle expiry of clients' connection pools (httpx 5 s, aiohttp "
        "15 s) and of proxies in front (60 s is common), so that no client sends a request on "
        "a connection the server is closing at that moment.",
    )
    access_log: bool = Field(
        default=True,
        description="Whether `juru serve` logs a line per HTTP request (uvicorn's access log, "
        "at INFO on stderr). In a profile of `GET /v1/runs/:id` under load, writing that line "
        "took about 4% of the API process's CPU.",
    )
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        default="auto",
        description="The event loop of `juru serve` and `juru worker` processes: `auto` is "
        "uvloop (installed with Juru) where it can be imported, else Python's own asyncio loop; "
        "`asyncio` picks Python's loop.",
    )
    stream_token_seconds: float = Field(
        default=900.0,
        gt=0,
        le=86_400,
        description="How long a stream token (`POST /v1/runs/:id/stream_token`, for the "
        "browser's EventSource) reads its run's events.",
    )
    runtime_enabled: bool = Field(
        default=False,
        description="Serve the Agent Runtime contract (/api/reasoning_engine, "
        "/api/stream_reasoning_engine); they have no authentication of their own.",
    )
    runtime_token: SecretStr | None = Field(
        default=None,
        description="When set, the Agent Runtime endpoints require it as `Authorization: Bearer "
        "<token>` (401 otherwise); set it when anything but the platform can reach the server.",
    )
    runtime_agent: str = Field(
        default="ReAct",
        min_length=1,
        description="The agent the Agent Runtime contract serves: a feature name or a hosted "
        "agent id (agt_...).",
    )
    files_dir: Path | None = Field(
        default=None,
        description="Where files (audio made by text_to_speech) are kept: default `files/` "
        "beside the SQLite database, or `.juru/files` with PostgreSQL.",
    )
    tts_library: Path | None = Field(
        default=None,
        description="The eSpeak NG shared library to speak with; default: the one in the "
        "espeakng-loader package.",
    )
    tts_max_characters: int = Field(default=5_000, ge=1, le=100_000)
    documents_max_bytes: int = Field(default=10 * 1024 * 1024, ge=1)
    documents_processing_seconds: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="How long text extraction and chunking of one uploaded document may take "
        "(in a worker thread, off the event loop) before the upload is refused.",
    )
    max_body_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="The largest request body accepted (413 beyond, refused while it streams "
        "in); document uploads have their own limit, JURU_DOCUMENTS_MAX_BYTES.",
    )
    max_input_messages: int = Field(
        default=1_000,
        ge=1,
        le=100_000,
        description="The most messages one run input or chat completion request may carry.",
    )
    max_input_characters: int = Field(
        default=500_000,
        ge=1,
        description="The most characters (all text of all messages) one run input or chat "
        "completion request may carry.",
    )
    mcp_servers: Path | None = Field(
        default=None,
        description="A TOML file of operator-defined MCP servers (Streamable HTTP or stdio) "
        "that agents name in `mcp_servers` by name only.",
    )
    mcp_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="How long one MCP tool call (or one listing of a server's tools) may take, "
        "connecting included, before it becomes an error result for the model.",
    )
    mcp_allow_private_networks: bool = Field(
        default=False,
        description="Let agents' own MCP servers be on loopback, link-local and private "
        "addresses (refused by default; operator-defined servers are always allowed).",
    )
    text_to_speech_rupiah_per_1k_chars: Decimal = Field(default=Decimal(250), ge=0)
    rag_search_rupiah_per_call: Decimal = Field(default=Decimal(50), ge=0)
    provider_env: dict[str, str] = Field(
        default_factory=dict,
        description="Provider credentials and base URLs; filled from `.env` and the environment.",
    )

    @field_validator("features", "playground_origins", mode="before")
    @classmethod
    def _split_commas(cls, value: Any) -> Any:
        return _comma_list(value)

    @field_validator("runtime_token", mode="before")
    @classmethod
    def _empty_token_is_none(cls, value: Any) -> Any:
        # `JURU_RUNTIME_TOKEN=` (set but empty) means no token, never an empty one.
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("tier_rate_limits")
    @classmethod
    def _parse_rate_limits(cls, value: dict[str, str]) -> dict[str, str]:
        for tier, limit in value.items():
            try:
                parse_many(limit)
            except ValueError as error:
                raise ValueError(f"rate limit of tier {tier!r}: {error}") from None
        if not value:
            raise ValueError("at least one tier is needed")
        return value

    def model_post_init(self, context: Any, /) -> None:
        if not self.provider_env:
            self.provider_env = read_provider_env()

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


def read_provider_env(
    env_file: Path = Path(".env"), environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Variables from `.env` overlaid by the process environment (the environment wins)."""
    values = {k: v for k, v in dotenv_values(env_file).items() if v is not None}
    values.update(os.environ if environ is None else environ)
    return values
