"""Scenario 1, overhead: one hosted run at a time, 5 model steps at 200 ms each.

End-to-end time (POST run to `succeeded` seen by the client) over the sum of model latencies,
and the server's CPU per model step, split by a py-spy profile taken during the same runs.
The client answers each pause as Juru's client does, with one request that also waits for the
next pause (`tool_outputs?wait=`); a second set of runs on the same server answers without
waiting and waits with `GET ?wait=`, two requests per step, as before 2026-12-04.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from bench.client import Api, RunResult, warm_every_worker
from bench.harness import Stack, process_tree, stack
from bench.profile import Profiler, shares

LATENCY = 0.2
STEPS_PER_RUN = 5


async def drive_one_at_a_time(
    api: Api, threads: list[str], answer_waits: bool = True
) -> list[tuple[RunResult, float]]:
    """A run on each thread, one after the other: each result with its seconds."""
    driven = []
    for thread in threads:
        started = time.monotonic()
        result = await api.drive(await api.start_run(thread), wait=30, answer_waits=answer_waits)
        if result.status != "succeeded":
            raise RuntimeError(f"a bench run ended {result.status}: {result.error}")
        driven.append((result, time.monotonic() - started))
    return driven


async def run(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    runs = 5 if quick else 30
    with stack(dialect, latency=LATENCY, tool_calls=STEPS_PER_RUN - 1) as bench:
        api = Api(bench.server.base_url, bench.key, connections=8)
        try:
            agent = await api.create_agent()
            threads = [await api.create_thread(agent) for _ in range(runs)]
            # A worker process's first run pays its imports and first builds, once.
            await warm_every_worker(api, agent, bench)
            warmed = len(bench.database.workers_that_ran())
            worker_processes = len(process_tree(bench.server.pid)) - 1
            pg_before = bench.database.pg_stats()
            census_before = bench.server.sql_census()
            model_before = bench.model.stats()["requests"]
            cpu_before = bench.server.cpu_seconds()
            api_cpu_before = bench.server.api_cpu_seconds()
            profiler = Profiler(bench.server.pid, out / f"overhead-{dialect}.pyspy.txt", 250)
            profiler.start()
            requests_before = api.requests
            driven = await drive_one_at_a_time(api, threads)
            requests = api.requests - requests_before
            cpu = bench.server.cpu_seconds() - cpu_before
            api_cpu = bench.server.api_cpu_seconds() - api_cpu_before
            model_steps = bench.model.stats()["requests"] - model_before
            samples = profiler.stop()
            pg_after = bench.database.pg_stats()
            census_after = bench.server.sql_census()
            two_requests = await per_step_with_two_requests(api, agent, bench, runs)
        finally:
            await api.aclose()
    cpu_ms_per_step = 1000 * cpu / model_steps
    commits: float | None = None
    rollbacks: float | None = None
    if pg_before is not None and pg_after is not None:
        commits = (pg_after["commits"] - pg_before["commits"]) / model_steps
        rollbacks = (pg_after["rollbacks"] - pg_before["rollbacks"]) / model_steps
    sql: dict[str, float] | None = None
    if census_before is not None and census_after is not None:
        sql = {
            shape: (count - census_before.get(shape, 0)) / model_steps
            for shape, count in sorted(census_after.items(), key=lambda item: -item[1])
            if count > census_before.get(shape, 0)
        }
    split = {part: share * cpu_ms_per_step for part, share in shares(samples).items()}
    seconds = [elapsed for _, elapsed in driven]
    ratios = [elapsed / (result.steps * LATENCY) for result, elapsed in driven]
    steps = sum(result.steps for result, _ in driven)
    stalls = sum(result.stalled_waits for result, _ in driven)
    return {
        "scenario": "overhead",
        "db": dialect,
        "runs": runs,
        "model_latency_s": LATENCY,
        "steps_per_run": STEPS_PER_RUN,
        "model_steps": model_steps,
        "steps_seen_by_client": steps,
        "worker_processes": worker_processes,
        "warmed_workers": warmed,
        "stalled_waits": stalls,
        "run_seconds_median": statistics.median(seconds),
        "ratio_median": statistics.median(ratios),
        "ratio_mean": sum(seconds) / (steps * LATENCY),
        "ratio_max": max(ratios),
        "server_cpu_ms_per_step": cpu_ms_per_step,
        # The API process's part (HTTP, the tool outputs' write); the rest is the workers'.
        "api_cpu_ms_per_step": 1000 * api_cpu / model_steps,
        "requests_per_step": requests / model_steps,
        "cpu_ms_per_step_by_part": split,
        "db_commits_per_step": commits,
        "db_rollbacks_per_step": rollbacks,
        # JURU_BENCH_SQL=1: statements on Juru's engine per model step, by verb and table.
        "sql_per_step": sql,
        # The same runs answered in two requests per step (outputs, then `GET ?wait=`).
        "two_requests_per_step": two_requests,
        "profile_samples": sum(samples.values()) if samples else 0,
        "profile_error": profiler.error,
    }


async def per_step_with_two_requests(
    api: Api, agent: str, bench: Stack, runs: int
) -> dict[str, float]:
    """Server CPU per model step and the median e2e ratio of `runs` runs whose pauses are
    answered without waiting and then waited for with `GET ?wait=`."""
    threads = [await api.create_thread(agent) for _ in range(runs)]
    model_before, cpu_before = bench.model.stats()["requests"], bench.server.cpu_seconds()
    api_cpu_before, requests_before = bench.server.api_cpu_seconds(), api.requests
    driven = await drive_one_at_a_time(api, threads, answer_waits=False)
    model_steps = bench.model.stats()["requests"] - model_before
    return {
        "requests_per_step": (api.requests - requests_before) / model_steps,
        "server_cpu_ms_per_step": 1000 * (bench.server.cpu_seconds() - cpu_before) / model_steps,
        "api_cpu_ms_per_step": 1000
        * (bench.server.api_cpu_seconds() - api_cpu_before)
        / model_steps,
        "ratio_median": statistics.median(
            elapsed / (result.steps * LATENCY) for result, elapsed in driven
        ),
    }
