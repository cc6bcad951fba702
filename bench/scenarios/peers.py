"""Scenarios 5-7, the peers: one ReAct graph with a server-side tool (`bench/graphs.py`), run
by the bare LangGraph runtime, by Juru's playground and by Aegra, on the same fake model.

Each peer is measured the same two ways, with model steps counted by the fake model:

- one run at a time (after a warm-up run): CPU per model step and e2e / model time;
- N closed-loop clients, each starting its next run when the last ended: model steps per
  second over a window after a warm-up, and CPU per step in that window.

CPU is the runtime's own: for the bare runtime this process's (`time.process_time`: LangGraph,
the saver and the model client all run here), for the servers their processes' from /proc.

The ratio of Juru's playground to the bare runtime comes from neither peer's own figures,
measured minutes apart, but from blocks of runs that alternate on one fake model while the
playground's server is up: the bare runtime's graph (SQLite saver) in this process, then the
playground, then the other way round (`alternating`).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bench import aegra
from bench.graphs import FEATURE_NAME, TOOL_NAME, build_react_graph
from bench.harness import FakeModel, postgres_reachable, stack, with_repo_path

LATENCY = 0.2
STEPS_PER_RUN = 5


@dataclass
class Peer:
    """How to do one run (raising unless it answered) and how much CPU the runtime used."""

    one_run: Callable[[], Awaitable[None]]
    cpu_seconds: Callable[[], float]
    model: FakeModel
    commits: Callable[[], int | None] = lambda: None
    in_process: bool = False  # the runtime is this process: no separate client CPU


def levels(quick: bool) -> tuple[list[int], float, float, int]:
    """(concurrency levels, warm-up s, window s, sequential runs)."""
    return ([10, 50], 2.0, 8.0, 5) if quick else ([10, 100], 5.0, 20.0, 20)


def alternation(quick: bool) -> tuple[int, int]:
    """(pairs of blocks, runs a block) of `alternating`."""
    return (2, 3) if quick else (4, 5)


async def sequential(peer: Peer, runs: int, warm_up: bool = True) -> dict[str, Any]:
    if warm_up:
        await peer.one_run()  # imports, pools, compiled graphs
    # The database's counts settle while the server idles: read them first here and last at
    # the end, so that the idle time is not in the runs' CPU.
    commits0 = peer.commits()
    steps0, cpu0 = peer.model.stats()["requests"], peer.cpu_seconds()
    started = time.monotonic()
    for _ in range(runs):
        await peer.one_run()
    elapsed, cpu = time.monotonic() - started, peer.cpu_seconds() - cpu0
    steps = peer.model.stats()["requests"] - steps0
    commits1 = peer.commits()
    return {
        "runs": runs,
        "model_steps": steps,
        "cpu_ms_per_step": 1000 * cpu / steps,
        "ratio": elapsed / (steps * LATENCY),
        "pg_commits_per_step": (
            (commits1 - commits0) / steps if commits0 is not None and commits1 is not None else None
        ),
    }


async def saturate(peer: Peer, concurrency: int, warmup: float, window: float) -> dict[str, Any]:
    """N lanes of runs back to back; a lane whose run fails counts the error and stops.

    The window opens after the warm-up and once every lane has ended its first run, so the
    lanes, started together, are out of step and every part of a run falls in the window.
    """
    errors: list[str] = []
    runs = 0
    lanes_past_first = 0
    warmed = asyncio.Event()

    def past_first() -> None:
        nonlocal lanes_past_first
        lanes_past_first += 1
        if lanes_past_first == concurrency:
            warmed.set()

    async def lane() -> None:
        nonlocal runs
        first = True
        while True:
            try:
                await peer.one_run()
            except (RuntimeError, httpx.HTTPError) as error:
                errors.append(f"{type(error).__name__}: {error}"[:300])
                if first:
                    past_first()
                return
            runs += 1
            if first:
                first = False
                past_first()

    tasks = [asyncio.create_task(lane()) for _ in range(concurrency)]
    try:
        await asyncio.sleep(warmup)  # the load runs meanwhile: the warm-up, not a sync
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(warmed.wait(), timeout=120)
        steps0, cpu0, runs0 = peer.model.stats()["requests"], peer.cpu_seconds(), runs
        client0, started = time.process_time(), time.monotonic()
        await asyncio.sleep(window)  # the measurement window
        steps = peer.model.stats()["requests"] - steps0
        cpu, elapsed = peer.cpu_seconds() - cpu0, time.monotonic() - started
        client = time.process_time() - client0
        ended = runs - runs0
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
    return {
        "concurrency": concurrency,
        "warmed_up": warmed.is_set(),
        "steps_per_s": steps / elapsed,
        "ideal_steps_per_s": concurrency / LATENCY,
        "model_steps": steps,
        "window_s": elapsed,
        "cpu_util": cpu / elapsed,
        "cpu_ms_per_step": 1000 * cpu / steps if steps else None,
        "client_cpu_util": None if peer.in_process else client / elapsed,
        "runs_ended": ended,
        "errors": len(errors),
        "last_error": errors[-1] if errors else "",
    }


async def alternating(juru: Peer, bare: Peer, quick: bool) -> dict[str, Any]:
    """Blocks of runs one at a time, the bare runtime's and Juru's in turn (each pair in the
    other order than the last): CPU per step of each, and the median of the pairs' ratios of
    Juru's to the bare runtime's."""
    pairs, runs = alternation(quick)
    await bare.one_run()  # warm-up; Juru's peer was measured just before
    blocks: list[dict[str, float]] = []
    for pair in range(pairs):
        order = [("bare", bare), ("juru", juru)]
        measured: dict[str, float] = {}
        for name, peer in order if pair % 2 == 0 else reversed(order):
            block = await sequential(peer, runs, warm_up=False)
            measured[name] = block["cpu_ms_per_step"]
            measured[f"{name}_steps"] = block["model_steps"]
        blocks.append(measured)
    return {
        "pairs": pairs,
        "runs_per_block": runs,
        "blocks": blocks,
        "ratio_median": statistics.median(b["juru"] / b["bare"] for b in blocks),
    }


async def measure(peer: Peer, quick: bool, against: Peer | None = None) -> dict[str, Any]:
    """The peer one run at a time, then (with `against`) in blocks alternating with that
    peer's (`alternating`), then under N clients. The alternation comes before the clients:
    runs of theirs still going after the window would add model steps to its blocks."""
    concurrency, warmup, window, runs = levels(quick)
    measured: dict[str, Any] = {"sequential": await sequential(peer, runs)}
    if against is not None:
        measured["against_bare"] = await alternating(peer, against, quick)
    rows = [await saturate(peer, level, warmup, window) for level in concurrency]
    return {
        **measured,
        "rows": rows,
        "saturation_steps_per_s": max(row["steps_per_s"] for row in rows),
    }


@contextlib.contextmanager
def fake_model() -> Any:
    workdir = Path(tempfile.mkdtemp(prefix="juru-bench-peer-"))
    model = FakeModel(workdir / "fake-model.log", LATENCY, STEPS_PER_RUN - 1, TOOL_NAME)
    try:
        yield model.start(), workdir
    finally:
        model.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.asynccontextmanager
async def saver(kind: str, folder: Path) -> AsyncIterator[Any]:
    if kind == "memory":
        yield InMemorySaver()
        return
    async with AsyncSqliteSaver.from_conn_string(str(folder / f"cp-{uuid.uuid4().hex}.db")) as db:
        yield db


@contextlib.asynccontextmanager
async def bare_peer(kind: str, model: FakeModel, folder: Path) -> AsyncIterator[Peer]:
    """The graph in this process on LangGraph's `kind` saver, against `model`."""
    async with saver(kind, folder) as checkpointer:
        graph = build_react_graph(model.base_url, "bench").copy({"checkpointer": checkpointer})

        async def one_run() -> None:
            config = {"configurable": {"thread_id": uuid.uuid4().hex}}
            state = await graph.ainvoke({"messages": [HumanMessage("go")]}, config)
            if state["messages"][-1].content != "done":
                raise RuntimeError(f"a bare run did not answer: {state['messages'][-1]}")

        yield Peer(one_run, time.process_time, model, in_process=True)


async def run_bare(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    """The graph in-process on LangGraph's savers (`dialect` names the row only)."""
    savers = []
    with fake_model() as (model, workdir):
        for kind in ("sqlite", "memory"):
            async with bare_peer(kind, model, workdir) as peer:
                savers.append({"checkpointer": kind, **await measure(peer, quick)})
    return {"scenario": "bare", "db": "in-process", "savers": savers}


async def run_playground(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    """The graph as a Juru playground feature, over HTTP: as Juru serves it (a turn saves its
    thread once, as it ends), then saving after every step as the other peers do, like for like.
    The server has no hosted workers (JURU_WORKERS=0): the playground runs a turn in its
    request, and idle workers would only add their polling."""
    served = await _playground(dialect, quick, "exit")
    every_step = await _playground(dialect, quick, "async")
    return {
        "scenario": "playground",
        "db": dialect,
        "workers": 0,
        **served,
        "every_step": every_step,
    }


async def _playground(dialect: str, quick: bool, durability: str) -> dict[str, Any]:
    env = {
        "PLAYGROUND_ENABLED": "true",
        "JURU_PLAYGROUND_DURABILITY": durability,
        "JURU_FEATURES": "bench.graphs:react_feature",
        "PYTHONPATH": with_repo_path(),
    }
    concurrency = max(levels(quick)[0])
    with stack(dialect, workers=0, latency=LATENCY, tool_name=TOOL_NAME, env=env) as bench:
        limits = httpx.Limits(max_connections=concurrency + 10)
        async with httpx.AsyncClient(
            base_url=bench.server.base_url, limits=limits, timeout=httpx.Timeout(120, pool=600)
        ) as http:

            async def one_run() -> None:
                body = {"feature": FEATURE_NAME, "message": "go", "max_steps": 25}
                response = await http.post("/playground/messages", json=body)
                if response.status_code != 200:
                    raise RuntimeError(f"playground: {response.status_code} {response.text}")
                turn = response.json()
                if turn["answer"] != "done":
                    raise RuntimeError(f"a playground turn did not answer: {turn['error']}")

            peer = Peer(one_run, bench.server.cpu_seconds, bench.model, bench.database.commits)
            if durability != "exit":
                return {"durability": durability, **await measure(peer, quick)}
            folder = Path(tempfile.mkdtemp(prefix="juru-bench-bare-"))
            try:
                async with bare_peer("sqlite", bench.model, folder) as bare:
                    return {"durability": durability, **await measure(peer, quick, bare)}
            finally:
                shutil.rmtree(folder, ignore_errors=True)


async def run_aegra(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    """Aegra on PostgreSQL (it has no other database), over HTTP; an Aegra that cannot run
    here is reported, not raised."""
    base = {"scenario": "aegra", "db": "postgresql", "python": sys.version.split()[0]}
    if not postgres_reachable():
        return {**base, "unavailable": "Aegra needs PostgreSQL, and none is reachable"}
    try:
        python = await asyncio.to_thread(aegra.ensure_venv)
    except (aegra.AegraUnavailableError, OSError, subprocess.SubprocessError) as error:
        return {**base, "unavailable": str(error)}
    version = aegra.installed_version(python)
    concurrency = max(levels(quick)[0])
    with fake_model() as (model, workdir):
        server = aegra.AegraServer(python, workdir, model)
        try:
            server.start()
        except RuntimeError as error:
            server.stop()
            return {**base, "version": version, "unavailable": f"Aegra did not start: {error}"}
        try:
            limits = httpx.Limits(max_connections=concurrency + 10)
            async with httpx.AsyncClient(
                base_url=server.base_url, limits=limits, timeout=httpx.Timeout(330, pool=600)
            ) as http:
                peer = Peer(
                    lambda: aegra.one_run(http), server.cpu_seconds, model, aegra.pg_commits
                )
                measured = await measure(peer, quick)
        finally:
            server.stop()
    return {**base, "version": version, "version_note": aegra.VERSION_NOTE, **measured}
