"""Scenario 2, throughput: N hosted runs at once (back to back on N threads), 200 ms per call.

Model steps per second (counted by the fake model) over a window after a warm-up, against the
ideal N / 0.2, with the CPU of the server, the fake model and the bench client in that window.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Any

from bench.client import Api, LaneTotals, lane
from bench.harness import stack
from bench.profile import Profiler, shares
from bench.stats import percentile

LATENCY = 0.2
# The lanes wait as Juru's client does. At saturation a step's request waits about
# N / (steps per second): 3-8 s at N = 200-500 on this machine, so a shorter wait would count
# plain queueing as stalls. A stall here is a run that made no progress for 30 s.
WAIT_SECONDS = 30.0
# (warm-up, measurement window) seconds at each level, in quick mode and in a full run.
QUICK_WINDOWS, FULL_WINDOWS = (3.0, 5.0), (10.0, 30.0)


async def measure_lanes(
    api: Api, threads: list[str], bench: Any, warmup: float, window: float, profile: Path | None
) -> dict[str, Any]:
    """Run one lane per thread; measure the window after the warm-up; cancel the lanes."""
    totals = LaneTotals()
    lanes = [asyncio.create_task(lane(api, thread, totals, WAIT_SECONDS)) for thread in threads]
    try:
        await asyncio.sleep(warmup)  # the load runs meanwhile: this is the warm-up, not a sync
        model0, server0 = bench.model.stats(), bench.server.cpu_seconds()
        pg0 = bench.database.pg_stats(settle=False)
        client0, started = time.process_time(), time.monotonic()
        profiler = Profiler(bench.server.pid, profile, 97).start() if profile else None
        await asyncio.sleep(window)  # the measurement window
        model1, server1 = bench.model.stats(), bench.server.cpu_seconds()
        client1, elapsed = time.process_time(), time.monotonic() - started
        samples = profiler.stop() if profiler else None
        pg1 = bench.database.pg_stats(settle=False)
    finally:
        for task in lanes:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*lanes, return_exceptions=True)
    steps = model1["requests"] - model0["requests"]
    server_cpu = server1 - server0
    waits = [took for sent, took in totals.waits if started <= sent <= started + elapsed]
    return {
        "steps_per_s": steps / elapsed,
        "window_s": elapsed,
        "model_steps": steps,
        "server_cpu_util": server_cpu / elapsed,
        "server_cpu_ms_per_step": 1000 * server_cpu / steps if steps else None,
        "fake_model_cpu_util": (model1["cpu_seconds"] - model0["cpu_seconds"]) / elapsed,
        "client_cpu_util": (client1 - client0) / elapsed,
        "runs_ended": totals.runs,
        "run_errors": totals.errors,
        "last_error": totals.last_error,
        "stalled_waits": totals.stalled_waits,
        # The lanes' waiting requests sent in the window: one per model step, each from the
        # client's answer (or the run's creation) to the run's next pause or end.
        "step_waits": len(waits),
        "wait_p50_s": percentile(waits, 0.5) if waits else None,
        "wait_p99_s": percentile(waits, 0.99) if waits else None,
        "cpu_share_by_part": shares(samples),
        # PostgreSQL only: new database sessions per second (a pool reconnecting shows here).
        "pg_sessions_per_s": (pg1["sessions"] - pg0["sessions"]) / elapsed if pg0 and pg1 else None,
    }


async def run(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    # N=10 and N=200 are the two points for "CPU per step stays flat".
    # JURU_BENCH_LEVELS (e.g. "200" or "10,200") replaces them, for an A/B at chosen levels.
    chosen = os.environ.get("JURU_BENCH_LEVELS")
    if chosen:
        levels = [int(level) for level in chosen.split(",")]
    else:
        levels = [10, 50] if quick else [10, 100, 200, 500]
    warmup, window = QUICK_WINDOWS if quick else FULL_WINDOWS
    rows = []
    for concurrency in levels:
        with stack(dialect, latency=LATENCY) as bench:
            api = Api(bench.server.base_url, bench.key, connections=2 * concurrency + 10)
            try:
                agent = await api.create_agent()
                threads = await asyncio.gather(
                    *(api.create_thread(agent) for _ in range(concurrency))
                )
                profile = out / f"throughput-{dialect}-{concurrency}.pyspy.txt"
                row = await measure_lanes(api, list(threads), bench, warmup, window, profile)
            finally:
                await api.aclose()
        ideal = concurrency / LATENCY
        efficiency = row["steps_per_s"] / ideal
        rows.append({"concurrency": concurrency, "ideal_steps_per_s": ideal, **row})
        rows[-1]["efficiency"] = efficiency
    best = max(rows, key=lambda row: row["steps_per_s"])
    return {
        "scenario": "throughput",
        "db": dialect,
        "model_latency_s": LATENCY,
        "warmup_s": warmup,
        "rows": rows,
        "saturation_steps_per_s": best["steps_per_s"],
        "saturated": best["server_cpu_util"] >= 0.9 or best["efficiency"] < 0.8,
    }
