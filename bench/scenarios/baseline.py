"""Scenario 4, baseline: Juru's hosted agent graph driven in-process by LangGraph, no server.

The same graph (`build_hosted_agent`) and the same ChatOpenAI client on the same fake model,
interrupts answered at once in-process; with LangGraph's in-memory saver and with its
AsyncSqliteSaver, and with the AsyncSqliteSaver saving only at each pause, as Juru saves a
client-tool agent's checkpoint (one run at a time only). Also the model client alone
(ChatOpenAI, then the bare openai client), so the runtime's cost per step is split from the
client's, and the request of a client-tool step on a FastAPI app with nothing behind it
(`bench.http_floor`): with the saver at pauses, the floor of a hosted step's CPU and of its
time end to end here; that request again with its tool outputs committed to SQLite and to
PostgreSQL and a hop to a second process and back, the floor of a step that keeps what it
was sent and runs its graph outside the process serving HTTP. The
same two savings, every node and at pauses, with LangGraph's AsyncPostgresSaver on a new
database of the bench's PostgreSQL (when it answers): the in-process floor of a hosted step on
PostgreSQL. And a
streamed reply of 200 chunks read as Juru's hosted agent reads it, as LangChain's defaults
would, and not streamed.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import openai
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.types import Command

from bench.client import TOOL
from bench.harness import (
    POSTGRES_URL,
    FakeModel,
    create_postgres_database,
    drop_postgres_database,
    postgres_reachable,
)
from bench.http_floor import measure as measure_http_step
from juru.agents.hosted import build_hosted_agent, run_input
from juru.models.catalog import ModelCatalog
from juru.models.streams import joined, until_silent

LATENCY = 0.2
STEPS_PER_RUN = 5
# The streamed reply of `streamed_reading`: about a paragraph, one chunk a word.
STREAMED_WORDS = 200


async def kept_steps(workdir: Path, steps: int) -> dict[str, dict[str, float]]:
    """A step's request on the empty app, paced as a hosted step's, with its tool outputs
    committed before the answer and a hop to a second process and back (`bench.http_floor`):
    its server CPU and time per database (PostgreSQL's when it answers)."""
    kinds = ["sqlite", "postgresql"] if postgres_reachable() else ["sqlite"]
    kept = {}
    for kind in kinds:
        with outputs_store(kind, workdir) as store:
            log = workdir / f"http-floor-kept-{kind}.log"
            step = await measure_http_step(log, steps, LATENCY, store=store, hop=True)
        kept[kind] = {"cpu_ms": step.cpu_ms, "wall_ms": step.wall_ms}
    return kept


@contextlib.contextmanager
def outputs_store(kind: str, workdir: Path) -> Iterator[str]:
    """Where the floor's request keeps the outputs it is sent (`bench.http_floor --store`): a
    SQLite file in `workdir`, or a PostgreSQL database of its own, dropped afterwards."""
    if kind != "postgresql":
        yield str(workdir / "floor-outputs.db")
        return
    name = create_postgres_database("juru_bench_floor")
    try:
        yield f"{POSTGRES_URL}/{name}"
    finally:
        drop_postgres_database(name)


@contextlib.asynccontextmanager
async def saver(kind: str) -> AsyncIterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
        return
    if kind == "postgresql":
        name = create_postgres_database("juru_bench_baseline")
        try:
            async with AsyncPostgresSaver.from_conn_string(f"{POSTGRES_URL}/{name}") as postgres:
                await postgres.setup()
                yield postgres
        finally:
            drop_postgres_database(name)
        return
    with tempfile.TemporaryDirectory(prefix="juru-bench-baseline-") as folder:
        async with AsyncSqliteSaver.from_conn_string(str(Path(folder) / "cp.db")) as sqlite:
            yield sqlite


async def one_run(graph: Any, durability: str = "async") -> int:
    """A run to its end, answering every interrupt at once; the model steps it took. With
    `durability="exit"` the checkpoint is saved at each pause, as Juru saves a client-tool
    agent's (LangGraph's default, "async", saves one after every node)."""
    config = {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": 45}
    payload: Any = run_input([HumanMessage("go")])
    steps = 0
    while True:
        pending = None
        async for _namespace, update in graph.astream(
            payload, config, stream_mode="updates", subgraphs=True, durability=durability
        ):
            if "llm_call" in update:
                steps += 1
            if "__interrupt__" in update:
                pending = update["__interrupt__"][0].value["pending_tool_calls"]
        if pending is None:
            return steps
        payload = Command(resume={"outputs": {call["id"]: '{"ok": true}' for call in pending}})


async def lanes(
    graph: Any, model: FakeModel, concurrency: int, warmup: float, window: float
) -> Any:
    async def lane() -> None:
        while True:
            await one_run(graph)

    tasks = [asyncio.create_task(lane()) for _ in range(concurrency)]
    try:
        await asyncio.sleep(warmup)  # the load runs meanwhile
        before, cpu, started = model.stats()["requests"], time.process_time(), time.monotonic()
        await asyncio.sleep(window)  # the measurement window
        steps = model.stats()["requests"] - before
        cpu, elapsed = time.process_time() - cpu, time.monotonic() - started
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "concurrency": concurrency,
        "steps_per_s": steps / elapsed,
        "ideal_steps_per_s": concurrency / LATENCY,
        "cpu_util": cpu / elapsed,
        "cpu_ms_per_step": 1000 * cpu / steps if steps else None,
    }


def stock_chat(base_url: str, http: Any) -> ChatOpenAI:
    """`ChatOpenAI` with LangChain's defaults (usage streamed too) on the fake model at
    `base_url`, through the connection pool `http`."""
    return ChatOpenAI(
        model="gpt-4o",
        api_key="bench",
        base_url=base_url,
        stream_usage=True,
        http_async_client=http,
    )


async def cpu_ms_per_call(call: Callable[[], Awaitable[Any]], calls: int) -> float:
    """CPU milliseconds per `call()`, after one call that warms it up."""
    await call()
    cpu = time.process_time()
    for _ in range(calls):
        await call()
    return 1000 * (time.process_time() - cpu) / calls


async def client_only(base_url: str, calls: int) -> dict[str, float]:
    """CPU per call of ChatOpenAI.ainvoke and of the bare openai client on LangChain's default
    transport (httpx), of ChatOpenAI on the SDK's aiohttp transport, and of Juru's catalog
    model (its first attempts posted without the SDK's request path), taken in alternate
    halves so that a drift of the machine falls on both."""
    pools = {"httpx": openai.DefaultAsyncHttpxClient(), "aiohttp": openai.DefaultAioHttpClient()}
    chats = {
        name: ChatOpenAI(
            model="gpt-4o", api_key="bench", base_url=base_url, http_async_client=http
        ).bind_tools([TOOL])
        for name, http in pools.items()
    }
    catalog = ModelCatalog.load()
    env = {"OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": base_url}
    chats["juru"] = catalog.chat_model("openai/gpt-4o-mini", env).bind_tools([TOOL])
    bare = openai.AsyncOpenAI(base_url=base_url, api_key="bench", http_client=pools["httpx"])
    messages: Any = [{"role": "user", "content": "go"}]
    tools: Any = [TOOL]
    measured: dict[str, list[float]] = {"httpx": [], "aiohttp": [], "juru": [], "openai": []}
    try:
        for _ in range(2):
            for name, chat in chats.items():
                measured[name].append(
                    await cpu_ms_per_call(partial(chat.ainvoke, "go"), calls // 2)
                )
            measured["openai"].append(
                await cpu_ms_per_call(
                    lambda: bare.chat.completions.create(
                        model="gpt-4o", messages=messages, tools=tools
                    ),
                    calls // 2,
                )
            )
    finally:
        for http in pools.values():
            await http.aclose()
        await catalog.aclose()
    mean = {name: sum(values) / len(values) for name, values in measured.items()}
    return {
        "chatopenai_cpu_ms_per_call": mean["httpx"],
        "chatopenai_aiohttp_cpu_ms_per_call": mean["aiohttp"],
        "juru_catalog_cpu_ms_per_call": mean["juru"],
        "openai_cpu_ms_per_call": mean["openai"],
    }


async def streamed_reading(workdir: Path, calls: int) -> dict[str, float]:
    """CPU per call of one streamed reply of `STREAMED_WORDS` chunks, read three ways in
    alternate halves: by Juru (its catalog's chat model, `until_silent`, `joined`, as the
    hosted agent's `_streamed_call`), by LangChain's defaults (the SDK's chunk models, its
    chunk timeout, each chunk added to the sum, as Juru read them before 2026-12-04), and the
    same reply not streamed (`ainvoke` of the catalog's model)."""
    model = FakeModel(workdir / "fake-model-words.log", 0.0, 0, answer_words=STREAMED_WORDS)
    model.start()
    catalog = ModelCatalog.load()
    http = openai.DefaultAioHttpClient()
    try:
        env = {"OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": model.base_url}
        juru_model = catalog.chat_model("openai/gpt-4o-mini", env)
        stock = stock_chat(model.base_url, http)
        prompt = [HumanMessage("go")]

        async def by_juru() -> None:
            chunks = [chunk async for chunk in until_silent(juru_model.astream(prompt))]
            _check_words(joined(chunks))

        async def by_defaults() -> None:
            whole: Any = None
            async for chunk in stock.astream(prompt):
                whole = chunk if whole is None else whole + chunk
            _check_words(whole)

        async def not_streamed() -> None:
            _check_words(await juru_model.ainvoke(prompt))

        ways = {"juru": by_juru, "langchain_defaults": by_defaults, "not_streamed": not_streamed}
        measured: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(2):
            for name, way in ways.items():
                measured[name].append(await cpu_ms_per_call(way, calls // 2))
    finally:
        await http.aclose()
        await catalog.aclose()
        model.stop()
    return {
        f"streamed_{name}_cpu_ms_per_call": sum(values) / len(values)
        for name, values in measured.items()
    }


def _check_words(reply: Any) -> None:
    words = len(str(reply.content).split())
    if words != STREAMED_WORDS:
        raise RuntimeError(f"a streamed bench reply had {words} words, not {STREAMED_WORDS}")


async def run(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    """`dialect` names the row only: the baseline has no Juru database."""
    runs = 5 if quick else 30
    levels = [10, 50] if quick else [10, 100, 500]
    warmup, window = (2.0, 5.0) if quick else (5.0, 20.0)
    workdir = Path(tempfile.mkdtemp(prefix="juru-bench-baseline-"))
    model = FakeModel(workdir / "fake-model.log", LATENCY, STEPS_PER_RUN - 1).start()
    rows = []
    try:
        model.set_latency(0.0)
        client = await client_only(model.base_url, 50 if quick else 300)
        streamed = await streamed_reading(workdir, 10 if quick else 60)
        back_to_back = await measure_http_step(workdir / "http-floor.log", 100 if quick else 500)
        # As in a hosted step, with the model call's wait before each request.
        paced_log = workdir / "http-floor-paced.log"
        paced = await measure_http_step(paced_log, 20 if quick else 100, LATENCY)
        kept = await kept_steps(workdir, 20 if quick else 100)
        model.set_latency(LATENCY)
        savers = [("memory", "async"), ("sqlite", "async"), ("sqlite", "exit")]
        if postgres_reachable():
            savers += [("postgresql", "async"), ("postgresql", "exit")]
        for kind, durability in savers:
            http = openai.DefaultAsyncHttpxClient()
            chat = stock_chat(model.base_url, http)
            async with saver(kind) as checkpointer:
                graph = build_hosted_agent(chat, [TOOL], "").copy({"checkpointer": checkpointer})
                await one_run(graph, durability)  # warm-up
                cpu, started, steps = time.process_time(), time.monotonic(), 0
                for _ in range(runs):
                    steps += await one_run(graph, durability)
                cpu, elapsed = time.process_time() - cpu, time.monotonic() - started
                at_pause = durability == "exit"
                sequential = {
                    "checkpointer": f"{kind}, saved at pauses" if at_pause else kind,
                    "durability": durability,
                    "cpu_ms_per_step": 1000 * cpu / steps,
                    "ratio": elapsed / (steps * LATENCY),
                    # One run at a time only on PostgreSQL: `from_conn_string` gives the saver
                    # one connection, which concurrent runs would queue on.
                    "concurrent": []
                    if at_pause or kind == "postgresql"
                    else [await lanes(graph, model, level, warmup, window) for level in levels],
                }
            await http.aclose()
            rows.append(sequential)
    finally:
        model.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "scenario": "baseline",
        "db": "in-process",
        "runs": runs,
        "model_latency_s": LATENCY,
        **client,
        "streamed_words": STREAMED_WORDS,
        **streamed,
        # A client-tool step's one request on an empty FastAPI app (`bench.http_floor`).
        "http_step_cpu_ms": paced.cpu_ms,
        "http_step_wall_ms": paced.wall_ms,
        "http_step_back_to_back": {"cpu_ms": back_to_back.cpu_ms, "wall_ms": back_to_back.wall_ms},
        # The same, paced, with the outputs kept and a hop to a second process, per database.
        "http_step_kept": kept,
        "rows": rows,
    }
