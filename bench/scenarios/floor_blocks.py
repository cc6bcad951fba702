"""The floor of a hosted step, measured in blocks that alternate with Juru's runs.

The baseline scenario measures the floor of a step that keeps its outputs (the graph
in-process, saving at pauses, plus a step's request on an empty app that commits the outputs
and hops to a second process and back), but at another moment of the sitting than the
overhead scenario measures Juru, and this machine's speed drifts within a sitting by more than
the gap between them (bench/RESULTS.md, thirty-third round: the in-process graph read 9.3 and
13.7 ms a step in two sittings of one afternoon). Here the same floor is measured on the
overhead scenario's own database kind, in blocks of runs that take turns with blocks of
Juru's runs on the overhead scenario's server, so that each figure of Juru has its floor
beside it, measured over the same minutes.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Protocol

import openai

from bench.client import TOOL, Api
from bench.harness import Stack
from bench.http_floor import measure as measure_http_step
from bench.scenarios.baseline import one_run, outputs_store, saver, stock_chat
from juru.agents.hosted import build_hosted_agent

# The request's steps measured per block (after the app's own warm-up).
REQUEST_STEPS = 10


class JuruBlocks(Protocol):
    """The overhead scenario's runs, driven one at a time in blocks (`overhead.Driving`)."""

    async def block(self, api: Api, bench: Stack, threads: list[str]) -> None: ...

    def per_step(self, name: str) -> float: ...

    def ratios(self) -> list[float]: ...


async def alternate(
    juru: JuruBlocks, api: Api, bench: Stack, threads: list[str], block_runs: int, latency: float
) -> dict[str, Any]:
    """Blocks of `block_runs` of Juru's runs on `threads`, each followed by a block of as many
    runs of the floor: Juru's CPU per step and median e2e ÷ model time over its blocks, and
    the floor's, with its two parts."""
    graph_cpu = graph_steps = request_cpu = 0.0
    graph_ratios: list[float] = []
    request_walls: list[float] = []
    with outputs_store(bench.database.dialect, bench.database.workdir) as store:
        async with saver(bench.database.dialect) as checkpointer:
            http = openai.DefaultAsyncHttpxClient()
            chat = stock_chat(bench.model.base_url, http)
            graph = build_hosted_agent(chat, [TOOL], "").copy({"checkpointer": checkpointer})
            try:
                await one_run(graph, "exit")  # warm-up
                for start in range(0, len(threads), block_runs):
                    await juru.block(api, bench, threads[start : start + block_runs])
                    for _ in range(block_runs):
                        cpu, started = time.process_time(), time.monotonic()
                        steps = await one_run(graph, "exit")
                        graph_cpu += time.process_time() - cpu
                        graph_steps += steps
                        graph_ratios.append((time.monotonic() - started) / (steps * latency))
                    log = bench.database.workdir / f"floor-request-{start}.log"
                    request = await measure_http_step(
                        log, REQUEST_STEPS, latency, store=store, hop=True
                    )
                    request_cpu += request.cpu_ms
                    request_walls.append(request.wall_ms)
            finally:
                await http.aclose()
    blocks = len(request_walls)
    graph_cpu_ms = 1000 * graph_cpu / graph_steps
    request_cpu_ms, request_wall_ms = request_cpu / blocks, statistics.median(request_walls)
    graph_ratio = statistics.median(graph_ratios)
    return {
        "blocks": blocks,
        "juru": {
            "cpu_ms_per_step": 1000 * juru.per_step("cpu"),
            "ratio_median": statistics.median(juru.ratios()),
        },
        "floor": {
            "cpu_ms_per_step": graph_cpu_ms + request_cpu_ms,
            "ratio_median": graph_ratio + request_wall_ms / (1000 * latency),
            "graph_cpu_ms_per_step": graph_cpu_ms,
            "graph_ratio_median": graph_ratio,
            "request_cpu_ms": request_cpu_ms,
            "request_wall_ms": request_wall_ms,
        },
    }
