"""Scenario 7, streams: runs followed by their event stream instead of `?wait=`.

1. The overhead loop (one run at a time, 5 model steps at 200 ms) with the client following
   each run with `stream: true` and answering pauses from the stream, in blocks alternating
   with blocks of runs driven with `?wait=` as in scenario 1, on the same server: server CPU
   per model step of each, and their difference (what a stream adds to a step).
2. 100 runs at once, each followed by its stream, started a little apart: how long after its
   write began each durable event reaches the client (run views and messages carry the time
   the write was prepared, so queueing for the database counts too).
3. 1,000 streams open on runs parked in `requires_action`: the RSS they add and the server's
   CPU while they are idle (heartbeats only).
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from bench.client import REQUEST_ERRORS, Api, RunResult, warm_every_worker
from bench.client_loop import loop_lag, settle_heap
from bench.harness import stack
from bench.scenarios.waiting import park
from bench.stats import percentile

LATENCY = 0.2
STEPS_PER_RUN = 5
CONCURRENT_STREAMS = 100
# The concurrent part's model latency: 100 runs at 4 s a call ask 25 steps/s, well under what
# the server carries, so the delay measured is the stream's, not a queue of saturated workers.
CONCURRENT_LATENCY = 4.0
OPEN_STREAMS = 1000
STREAMS_PER_PARKED_RUN = 10
# Seconds of each measurement window (the concurrent part runs three).
QUICK_WINDOW = 10.0
FULL_WINDOW = 30.0
# Events a parked run's log holds: queued, running, input, reply, step, requires_action.
PARKED_EVENTS = 6
# Runs per block of the one-at-a-time part, which alternates streamed and `?wait=` blocks.
BLOCK = 5
# Runs of that part of each kind, streamed and `?wait=` (quick mode, full run).
QUICK_RUNS, FULL_RUNS = 5, 30


async def sequential(api: Api, threads: list[str], bench: Any) -> dict[str, Any]:
    """One run at a time on each of `threads` (fresh ones, an even number), in alternating
    blocks: runs driven with `?wait=` as in scenario 1, and runs followed by their stream, on
    this same server. The difference of their CPU per step is what attaching a stream costs,
    free of any difference between two servers or two moments of the sitting. The SQL census,
    when on, counts both kinds of runs."""
    commits_before = bench.database.commits()
    census_before = bench.server.sql_census()
    spent = {"streamed": 0.0, "waited": 0.0}
    steps = {"streamed": 0, "waited": 0}
    ratios: dict[str, list[float]] = {"streamed": [], "waited": []}
    streamed_commits = 0
    for start in range(0, len(threads), 2 * BLOCK):
        pair = threads[start : start + 2 * BLOCK]
        half = len(pair) // 2
        for mode, block in (("waited", pair[:half]), ("streamed", pair[half:])):
            # The database's counts settle while the server idles: read before the block's
            # CPU, and after it at the end, so that the idle time is in neither mode's CPU.
            block_commits = bench.database.commits() if mode == "streamed" else None
            model_before = bench.model.stats()["requests"]
            cpu_before = bench.server.cpu_seconds()
            for thread in block:
                if mode == "streamed":
                    result = await api.follow(thread)
                else:
                    result = await api.run_to_end(thread, wait=30)
                if result.status != "succeeded":
                    raise RuntimeError(f"a {mode} bench run ended {result.status}: {result.error}")
                ratios[mode].append(result.seconds / (result.steps * LATENCY))
            spent[mode] += bench.server.cpu_seconds() - cpu_before
            steps[mode] += bench.model.stats()["requests"] - model_before
            if mode == "streamed" and block_commits is not None:
                streamed_commits += (bench.database.commits() or 0) - block_commits
    census_after = bench.server.sql_census()
    total_steps = steps["streamed"] + steps["waited"]
    sql = None
    if census_before is not None and census_after is not None:
        sql = {
            shape: (count - census_before.get(shape, 0)) / total_steps
            for shape, count in sorted(census_after.items(), key=lambda item: -item[1])
            if count > census_before.get(shape, 0)
        }
    streamed_ms = 1000 * spent["streamed"] / steps["streamed"]
    waited_ms = 1000 * spent["waited"] / steps["waited"]
    return {
        "runs": len(ratios["streamed"]),
        "waited_runs": len(ratios["waited"]),
        "model_steps": steps["streamed"],
        "server_cpu_ms_per_step": streamed_ms,
        "waited_cpu_ms_per_step": waited_ms,
        "streamed_minus_waited_ms": streamed_ms - waited_ms,
        "ratio_median": statistics.median(ratios["streamed"]),
        "waited_ratio_median": statistics.median(ratios["waited"]),
        "db_commits_per_step": (
            None if commits_before is None else streamed_commits / steps["streamed"]
        ),
        "sql_per_step": sql,
    }


async def concurrent(api: Api, threads: list[str], window: float, bench: Any) -> dict[str, Any]:
    delays: list[float] = []
    results: list[RunResult] = []
    errors: list[str] = []

    async def lane(thread: str, offset: float) -> None:
        await asyncio.sleep(offset)  # spread the lanes' starts over one model call: no bursts
        while True:
            try:
                result = await api.follow(thread, delays=delays)
            except REQUEST_ERRORS as error:
                errors.append(f"{type(error).__name__}: {error}"[:300])
                return
            results.append(result)

    # The delays are timed here: the client's own collections must not show as the server's.
    settle_heap()
    model0, cpu0, started = bench.model.stats(), bench.server.cpu_seconds(), time.monotonic()

    spread = CONCURRENT_LATENCY / len(threads)
    lanes = [asyncio.create_task(lane(t, i * spread)) for i, t in enumerate(threads)]
    async with loop_lag() as lag:
        try:
            await asyncio.sleep(window)  # the measurement window, the lanes run meanwhile
        finally:
            for task in lanes:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*lanes, return_exceptions=True)
    elapsed = time.monotonic() - started
    steps = bench.model.stats()["requests"] - model0["requests"]
    cpu = bench.server.cpu_seconds() - cpu0
    failed = [r for r in results if r.status != "succeeded"]
    milliseconds = [1000 * delay for delay in delays]
    return {
        "streams": len(threads),
        "model_latency_s": CONCURRENT_LATENCY,
        "steps_per_s": steps / elapsed,
        "server_cpu_util": cpu / elapsed,
        "lane_errors": len(errors),
        "last_error": errors[-1] if errors else "",
        "runs_ended": len(results),
        "runs_failed": len(failed),
        "events_timed": len(milliseconds),
        "delay_p50_ms": percentile(milliseconds, 0.5),
        "delay_p99_ms": percentile(milliseconds, 0.99),
        "delay_max_ms": max(milliseconds) if milliseconds else None,
        # How late the client's loop woke meanwhile: what of the delays could be the client's.
        "client_lag_p99_ms": lag.p99_ms(),
        "client_lag_max_ms": lag.max_ms(),
    }


async def idle_streams(bench: Any, parked: list[str], idle_seconds: float) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=OPEN_STREAMS + 10)
    headers = {"Authorization": f"Bearer {bench.key}"}
    replayed = 0
    all_replayed = asyncio.Event()
    rss_before = bench.server.rss_bytes()

    async def hold(http: httpx.AsyncClient, run_id: str) -> None:
        nonlocal replayed
        async with aconnect_sse(http, "GET", f"/v1/runs/{run_id}/events") as source:
            seen = 0
            async for event in source.aiter_sse():
                if event.event != "message.delta":
                    seen += 1
                if seen == PARKED_EVENTS:
                    replayed += 1
                    if replayed == OPEN_STREAMS:
                        all_replayed.set()

    timeout = httpx.Timeout(120, pool=600)
    async with httpx.AsyncClient(
        base_url=bench.server.base_url, headers=headers, limits=limits, timeout=timeout
    ) as http:
        targets = [run for run in parked for _ in range(STREAMS_PER_PARKED_RUN)][:OPEN_STREAMS]
        holders = [asyncio.create_task(hold(http, run_id)) for run_id in targets]
        try:
            await asyncio.wait_for(all_replayed.wait(), 300)
            rss_open = bench.server.rss_bytes()
            cpu_before = bench.server.cpu_seconds()
            await asyncio.sleep(idle_seconds)  # the idle window being measured
            idle_cpu = bench.server.cpu_seconds() - cpu_before
        finally:
            for task in holders:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(*holders, return_exceptions=True)
    mib = 1024 * 1024
    return {
        "open_streams": OPEN_STREAMS,
        "rss_before_mib": rss_before / mib,
        "rss_open_mib": rss_open / mib,
        "added_mib": (rss_open - rss_before) / mib,
        "idle_seconds": idle_seconds,
        "idle_cpu_util": idle_cpu / idle_seconds,
    }


async def run(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    runs = QUICK_RUNS if quick else FULL_RUNS
    window = QUICK_WINDOW if quick else FULL_WINDOW
    with stack(dialect, latency=LATENCY, tool_calls=STEPS_PER_RUN - 1) as bench:
        api = Api(bench.server.base_url, bench.key, connections=2 * CONCURRENT_STREAMS + 20)
        try:
            agent = await api.create_agent()
            threads = [await api.create_thread(agent) for _ in range(2 * runs + 1)]
            # Warm-up of every worker process, and of both ways to follow a run.
            await warm_every_worker(api, agent, bench)
            await api.follow(threads.pop())
            one_at_a_time = await sequential(api, threads, bench)
            lanes = await asyncio.gather(
                *(api.create_thread(agent) for _ in range(CONCURRENT_STREAMS))
            )
            bench.model.set_latency(CONCURRENT_LATENCY)
            many = await concurrent(api, list(lanes), 3 * window, bench)
            bench.model.set_latency(LATENCY)
            parked = await park(api, agent, OPEN_STREAMS // STREAMS_PER_PARKED_RUN)
            idle = await idle_streams(bench, parked, window)
        finally:
            await api.aclose()
    return {
        "scenario": "streams",
        "db": dialect,
        "model_latency_s": LATENCY,
        "sequential": one_at_a_time,
        "concurrent": many,
        "idle": idle,
    }
