"""Scenario 1, overhead: one hosted run at a time, 5 model steps at 200 ms each.

End-to-end time (POST run to `succeeded` seen by the client) over the sum of model latencies,
and the server's CPU per model step, split by a py-spy profile taken during the same runs.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from bench.client import Api, warm_every_worker
from bench.harness import process_tree, stack
from bench.profile import Profiler, shares

LATENCY = 0.2
STEPS_PER_RUN = 5


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
            ratios, seconds, steps, stalls = [], [], 0, 0
            for thread in threads:
                started = time.monotonic()
                result = await api.drive(await api.start_run(thread), wait=30)
                elapsed = time.monotonic() - started
                if result.status != "succeeded":
                    raise RuntimeError(f"a bench run ended {result.status}: {result.error}")
                seconds.append(elapsed)
                ratios.append(elapsed / (result.steps * LATENCY))
                steps += result.steps
                stalls += result.stalled_waits
            cpu = bench.server.cpu_seconds() - cpu_before
            api_cpu = bench.server.api_cpu_seconds() - api_cpu_before
            model_steps = bench.model.stats()["requests"] - model_before
            samples = profiler.stop()
            pg_after = bench.database.pg_stats()
            census_after = bench.server.sql_census()
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
        "cpu_ms_per_step_by_part": split,
        "db_commits_per_step": commits,
        "db_rollbacks_per_step": rollbacks,
        # JURU_BENCH_SQL=1: statements on Juru's engine per model step, by verb and table.
        "sql_per_step": sql,
        "profile_samples": sum(samples.values()) if samples else 0,
        "profile_error": profiler.error,
    }
