"""Scenario 3, waiting runs: many runs parked in `requires_action`.

The server's RSS before and after parking them, then `GET /v1/runs/:id` of parked runs at a
fixed 50 requests per second, the issue's probe (open loop, in its own process, latency counted
from each request's scheduled time), while 100 other runs keep the workers busy at 200 ms per
model call. The reads are counted over the lanes' measurement window only: the lanes' first
seconds, when 100 runs start at once, are their warm-up and are not the saturated state the
probe is about (the reads go on through them, uncounted, as the lanes' steps do).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import multiprocessing
import os
import random
import time
from pathlib import Path
from typing import Any

import httpx

from bench.client import Api, warm_every_worker
from bench.harness import stack
from bench.scenarios.throughput import measure_lanes
from bench.stats import percentile

LATENCY = 0.2
ACTIVE_RUNS = 100
RATE = 50.0
PARKING_CONCURRENCY = 32
# The lanes' warm-up: the 100 runs start together, then keep the workers saturated.
LANES_WARMUP_SECONDS = 2.0


async def _open_loop(
    base_url: str, key: str, run_ids: list[str], rate: float, seconds: float, warmup: float
) -> dict[str, Any]:
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(
        base_url=base_url, headers=headers, limits=limits, timeout=30
    ) as http:

        async def one(run_id: str, scheduled: float, counted: bool) -> None:
            nonlocal errors
            try:
                response = await http.get(f"/v1/runs/{run_id}")
            except httpx.HTTPError:
                errors += counted  # e.g. a keep-alive connection the server closed meanwhile
                return
            if response.status_code != 200:
                errors += counted
            if counted:
                latencies.append(time.monotonic() - scheduled)

        skipped = int(rate * warmup)
        total = skipped + int(rate * seconds)
        picks = random.Random(6).choices(run_ids, k=total)
        tasks = []
        start = time.monotonic() + 0.1
        for index, run_id in enumerate(picks):
            scheduled = start + index / rate
            delay = scheduled - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)  # the open-loop schedule
            tasks.append(asyncio.create_task(one(run_id, scheduled, index >= skipped)))
        await asyncio.gather(*tasks)
        elapsed = time.monotonic() - start - warmup
    return {"latencies": latencies, "errors": errors, "sent": total - skipped, "elapsed": elapsed}


def open_loop(
    base_url: str, key: str, run_ids: list[str], rate: float, seconds: float, warmup: float = 0.0
) -> Any:
    """The load generator, run in a process of its own (so the bench client's lanes and this
    schedule do not share one event loop): `rate` reads per second for `warmup` + `seconds`,
    the latencies of the last `seconds` counted."""
    return asyncio.run(_open_loop(base_url, key, run_ids, rate, seconds, warmup))


async def park(api: Api, agent: str, count: int) -> list[str]:
    """Start `count` runs on threads of their own and wait until all wait for tool outputs."""
    gate = asyncio.Semaphore(PARKING_CONCURRENCY)

    async def one() -> str:
        async with gate:
            run = await api.start_run(await api.create_thread(agent))
            result = await api.drive(run, wait=30, stop_at="requires_action")
        if result.status != "requires_action":
            raise RuntimeError(f"a parked run ended {result.status}: {result.error}")
        return str(run["id"])

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def run(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    parked_count = int(os.environ.get("JURU_BENCH_PARKED", 1000 if quick else 10_000))
    # The loaded probe's length (quick: 250 reads, whose p99 is the third slowest).
    seconds = float(os.environ.get("JURU_BENCH_READ_SECONDS", 5.0 if quick else 30.0))
    # Parked at 200 ms per call, like the other scenarios.
    with stack(dialect, latency=LATENCY) as bench:
        api = Api(bench.server.base_url, bench.key, connections=2 * ACTIVE_RUNS + 50)
        try:
            agent = await api.create_agent()
            await warm_every_worker(api, agent, bench)
            rss_before = bench.server.rss_bytes()
            started = time.monotonic()
            # In two halves: the second half's growth is the cost of one more parked run,
            # apart from the high-water mark that parking at all leaves behind.
            parked = await park(api, agent, parked_count // 2)
            rss_half = bench.server.rss_bytes()
            parked += await park(api, agent, parked_count - len(parked))
            parking_s = time.monotonic() - started
            rss_parked = bench.server.rss_bytes()
            threads = list(
                await asyncio.gather(*(api.create_thread(agent) for _ in range(ACTIVE_RUNS)))
            )
            context = multiprocessing.get_context("spawn")
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
                # The control: the same reads with no active run.
                quiet_cpu = bench.server.cpu_seconds()
                quiet = await asyncio.get_running_loop().run_in_executor(
                    pool, open_loop, bench.server.base_url, bench.key, parked, RATE, seconds / 2
                )
                quiet_cpu = bench.server.cpu_seconds() - quiet_cpu
                load = asyncio.get_running_loop().run_in_executor(
                    pool,
                    open_loop,
                    bench.server.base_url,
                    bench.key,
                    parked,
                    RATE,
                    seconds,
                    LANES_WARMUP_SECONDS,
                )
                active = await measure_lanes(
                    api, threads, bench, LANES_WARMUP_SECONDS, seconds, None
                )
                reads = await load
            rss_after = bench.server.rss_bytes()
        finally:
            await api.aclose()
    latencies = [1000 * value for value in reads["latencies"]]
    quiet_latencies = [1000 * value for value in quiet["latencies"]]
    mib = 1024 * 1024
    return {
        "scenario": "waiting",
        "db": dialect,
        "parked_runs": parked_count,
        "parking_s": parking_s,
        "rss_before_mib": rss_before / mib,
        "rss_parked_mib": rss_parked / mib,
        "rss_added_mib": (rss_parked - rss_before) / mib,
        "rss_after_load_mib": rss_after / mib,
        "kib_per_parked_run": (rss_parked - rss_before) / 1024 / parked_count,
        "rss_half_mib": rss_half / mib,
        "marginal_kib_per_parked_run": (rss_parked - rss_half) / 1024 / (parked_count / 2),
        "read_rate": RATE,
        "reads_sent": reads["sent"],
        "reads_errors": reads["errors"],
        "reads_rate_achieved": reads["sent"] / reads["elapsed"],
        "get_p50_ms": percentile(latencies, 0.50),
        "get_p90_ms": percentile(latencies, 0.90),
        "get_p99_ms": percentile(latencies, 0.99),
        "get_max_ms": max(latencies, default=float("nan")),
        "quiet_get_p50_ms": percentile(quiet_latencies, 0.50),
        "quiet_get_p99_ms": percentile(quiet_latencies, 0.99),
        "quiet_reads_errors": quiet["errors"],
        "quiet_cpu_ms_per_get": 1000 * quiet_cpu / max(1, quiet["sent"]),
        "active_runs": ACTIVE_RUNS,
        "active_steps_per_s": active["steps_per_s"],
        "server_cpu_util_under_load": active["server_cpu_util"],
        "active_run_errors": active["run_errors"],
    }
