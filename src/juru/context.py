"""Everything an app runs on, opened together and closed together."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from juru.agents.builtin import builtin_features
from juru.agents.features import load_feature_reference, merge_features
from juru.agents.registry import FeatureRegistry
from juru.billing.access import Access, KeyCache
from juru.billing.accounts import AccountAdmin, local_key_path
from juru.billing.meter import Meter
from juru.billing.rate_limits import RateLimiter
from juru.core.clock import Clock, SystemClock
from juru.core.money import PriceRules
from juru.engine.events import PostgresRunEvents, RunEvents
from juru.engine.execution import RunContext
from juru.engine.graphs import CompiledGraphs
from juru.engine.machine import RunLimits, RunMachine
from juru.engine.socket_events import SocketRunEvents, events_directory
from juru.engine.worker import Reaper, Worker, take_back_runs, worker_name
from juru.files.storage import FileStorage, LocalFileStorage
from juru.hosted.chat import ChatCompletions
from juru.hosted.documents import DocumentLibrary
from juru.hosted.files import FileService
from juru.hosted.service import HostedService
from juru.models.catalog import ModelCatalog
from juru.playground import Playground
from juru.runtime.agents import RuntimeAgents
from juru.runtime.service import RuntimeService
from juru.settings import Settings
from juru.store.checkpointer import open_checkpointer
from juru.store.database import Database, open_database
from juru.store.migrations import upgrade_to_head
from juru.store.transactions import wait_for_writes
from juru.store.urls import DatabaseUrl
from juru.tools.mcp_network import NetworkPolicy
from juru.tools.mcp_servers import load_operator_servers
from juru.tools.mcp_toolbox import McpServices
from juru.tools.runtime import BuiltinPrices, BuiltinServices
from juru.tools.speech import EspeakSynthesizer

SHUTDOWN_WAIT_SECONDS = 10.0


@dataclass
class AppContext:
    """The settings and the open resources of one running app."""

    settings: Settings
    database: DatabaseUrl
    engine: Database
    checkpointer: BaseCheckpointSaver[Any]
    catalog: ModelCatalog
    features: FeatureRegistry
    playground: Playground
    machine: RunMachine
    hosted: HostedService
    meter: Meter
    chat: ChatCompletions
    access: Access
    accounts: AccountAdmin
    runtime: RuntimeService
    builtins: BuiltinServices
    mcp: McpServices
    files: FileService
    documents: DocumentLibrary
    graphs: CompiledGraphs

    def run_context(self) -> RunContext:
        return RunContext(
            self.machine,
            self.checkpointer,
            self.catalog,
            self.settings.provider_env,
            self.meter,
            self.graphs,
            self.builtins,
            self.mcp,
            self.settings.max_agent_depth,
        )


def load_catalog(settings: Settings) -> ModelCatalog:
    return ModelCatalog.load(Path(settings.model_catalog) if settings.model_catalog else None)


def price_rules(settings: Settings) -> PriceRules:
    return PriceRules(settings.tier_discounts, settings.volume_discounts)


def file_storage(settings: Settings, database: DatabaseUrl) -> FileStorage:
    if settings.files_dir is not None:
        return LocalFileStorage(settings.files_dir)
    base = database.sqlite_path.parent if database.is_sqlite else Path(".juru")
    return LocalFileStorage(base / "files")


def builtin_services(
    settings: Settings, engine: Database, storage: FileStorage, meter: Meter, clock: Clock
) -> BuiltinServices:
    prices = BuiltinPrices(
        text_to_speech_per_1k_characters=settings.text_to_speech_rupiah_per_1k_chars,
        rag_search_per_call=settings.rag_search_rupiah_per_call,
    )
    synthesizer = EspeakSynthesizer(settings.tts_library)
    return BuiltinServices(
        engine, storage, synthesizer, meter, clock, prices, settings.tts_max_characters
    )


def run_events(database: DatabaseUrl, engine: Database | None = None) -> RunEvents:
    """The run events of a process on `database`; with `engine`, its writes' notices go out
    from its writer as they commit (SQLite; a PostgreSQL transaction sends its own)."""
    if database.is_sqlite:
        events = SocketRunEvents(events_directory(database.sqlite_path))
        if engine is not None:
            events.send_from_writer(engine)
        return events
    return PostgresRunEvents(database.libpq_dsn())


def mcp_services(settings: Settings) -> McpServices:
    """The operator's MCP servers (`JURU_MCP_SERVERS`, read once here) and the network rule
    for agents' own servers."""
    return McpServices(
        operators=load_operator_servers(settings.mcp_servers),
        network=NetworkPolicy(allow_private=settings.mcp_allow_private_networks),
        timeout_seconds=settings.mcp_timeout_seconds,
    )


@contextlib.asynccontextmanager
async def open_context(
    settings: Settings, clock: Clock | None = None, limits: RunLimits | None = None
) -> AsyncIterator[AppContext]:
    """Open the database (migrating SQLite), the checkpointer, run events and the services."""
    database = DatabaseUrl.parse(settings.database_url)
    catalog = load_catalog(settings)
    mcp = mcp_services(settings)
    features = merge_features(
        [
            builtin_features(settings, catalog),
            *(load_feature_reference(target) for target in settings.features),
        ]
    )
    clock = clock or SystemClock()
    if database.is_sqlite:
        await asyncio.to_thread(upgrade_to_head, database)
    engine = open_database(database, settings.sqlite_busy_timeout_ms, settings.postgres_writers)
    events = run_events(database, engine)
    try:
        await events.start()
        async with open_checkpointer(
            database, engine, settings.sqlite_busy_timeout_ms
        ) as checkpointer:
            registry = FeatureRegistry(features, checkpointer)
            limits = limits or RunLimits(
                lease_seconds=settings.lease_seconds, events_days=settings.run_events_days
            )
            machine = RunMachine(engine, events, clock, limits)
            meter = Meter(engine, catalog, price_rules(settings), clock, settings.hold_seconds)
            runtime_agents = RuntimeAgents(
                settings.runtime_agent,
                registry,
                engine,
                catalog,
                checkpointer,
                settings.provider_env,
                meter,
            )
            if settings.runtime_enabled:
                runtime_agents.check()
            keys = KeyCache(clock, settings.key_cache_seconds)
            accounts = AccountAdmin(
                engine, clock, settings.tier_rate_limits.keys(), on_revoke=keys.forget
            )
            local_key = local_key_path(database)
            if local_key is not None:
                await accounts.bootstrap_local(local_key, settings.local_account_balance)
            limiter = RateLimiter(settings.rate_limit_storage, settings.tier_rate_limits)
            storage = file_storage(settings, database)
            try:
                yield AppContext(
                    settings=settings,
                    database=database,
                    engine=engine,
                    checkpointer=checkpointer,
                    catalog=catalog,
                    features=registry,
                    playground=Playground(
                        registry, engine, durability=settings.playground_durability
                    ),
                    machine=machine,
                    hosted=HostedService(
                        machine,
                        catalog,
                        checkpointer,
                        meter,
                        settings.stream_heartbeat_seconds,
                        settings.stream_token_seconds,
                        mcp,
                    ),
                    meter=meter,
                    chat=ChatCompletions(catalog, meter, settings.provider_env),
                    access=Access(engine, limiter, keys),
                    accounts=accounts,
                    runtime=RuntimeService(runtime_agents, engine, checkpointer, clock.now),
                    builtins=builtin_services(settings, engine, storage, meter, clock),
                    mcp=mcp,
                    files=FileService(engine, storage),
                    documents=DocumentLibrary(
                        engine,
                        clock,
                        settings.documents_max_bytes,
                        settings.documents_processing_seconds,
                    ),
                    graphs=CompiledGraphs(checkpointer),
                )
            finally:
                limiter.close()
    finally:
        await wait_for_writes(engine)
        await events.stop()
        await catalog.aclose()
        await engine.dispose()


@contextlib.asynccontextmanager
async def running_workers(
    context: AppContext, concurrency: int, stable_name: str | None = None, *, reaper: bool = True
) -> AsyncIterator[Worker | None]:
    """Run a worker (and, with `reaper`, the reaper) in the background while the block runs.

    With a `stable_name` (the same in every incarnation of this worker, and used by no other
    live process), the runs its previous process left are taken back at once.
    """
    if concurrency <= 0:
        yield None
        return
    if stable_name is not None:
        await take_back_runs(context.machine, f"{stable_name}/")
    worker = Worker(context.run_context(), concurrency, worker_name(stable_name))
    tasks = [asyncio.create_task(worker.run_forever(), name="juru-worker")]
    if reaper:
        reaping = Reaper(context.run_context()).run_forever()
        tasks.append(asyncio.create_task(reaping, name="juru-reaper"))
    try:
        yield worker
    finally:
        for task in tasks:
            task.cancel()
        # Bounded: a task stuck in a driver call must not keep the process from stopping.
        await asyncio.wait(tasks, timeout=SHUTDOWN_WAIT_SECONDS)
