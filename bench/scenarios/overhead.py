"""Scenario 1, overhead: one hosted run at a time, 5 model steps at 200 ms each.

End-to-end time (POST run to `succeeded` seen by the client) over the sum of model latencies,
and the server's CPU per model step, split by a py-spy profile of as many runs right after
them. The profile is not taken during the measured runs, so that their figures never carry
the sampler's weight: on a two-CPU machine py-spy sampling the server's processes 250 times a
second competes with them for the CPUs (bench/RESULTS.md, twenty-eighth round, where profiled
runs read up to 3 ms a step more than unprofiled ones on SQLite, and in one sitting less).
The client drives runs as Juru's client does: the run's creation waits for its first pause, and
each pause is answered with one request that also waits for the next (`tool_outputs?wait=`),
one request per model step.

Then, on the same server, blocks of such runs alternate with blocks of runs driven as before
2026-12-04: created, then each pause answered without waiting and waited for with
`GET ?wait=`, two requests per step. Only the alternation compares the two: run one set after
the other, the later one ran on a fuller database and read a few ms slower per step.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.client import Api, RunResult, warm_every_worker
from bench.harness import Stack, process_tree, stack
from bench.profile import Profiler, shares
from bench.scenarios import floor_blocks

LATENCY = 0.2
STEPS_PER_RUN = 5
BLOCK_RUNS = 5
# Runs of each measured set (quick mode, full run): a multiple of BLOCK_RUNS. The census's runs
# are fewer: its counts do not depend on the machine's speed. The smoke tests make them smaller.
QUICK_RUNS, FULL_RUNS = 5, 30
CENSUS_RUNS = 5


def counters(bench: Stack, api: Api, database: bool, ending: bool = False) -> dict[str, float]:
    """What the server and the client have done so far: model steps, CPU seconds (the whole
    server, its API process), requests sent and, with `database`, PostgreSQL commits and
    rollbacks (once they settle) and statements by shape (the SQL census, JURU_BENCH_SQL=1).

    The database's counts settle for seconds while the server idles: they are read first at
    the start of a block (`ending=False`) and last at its end, so that idle time is never in
    the block's CPU."""
    settled = database_counts(bench) if database and not ending else {}
    now = {
        "model_steps": float(bench.model.stats()["requests"]),
        "cpu": bench.server.cpu_seconds(),
        "api_cpu": bench.server.api_cpu_seconds(),
        "requests": float(api.requests),
    }
    if database and ending:
        settled = database_counts(bench)
    return {**now, **settled}


def database_counts(bench: Stack) -> dict[str, float]:
    counts: dict[str, float] = {}
    pg = bench.database.pg_stats()
    if pg is not None:
        counts.update(commits=pg["commits"], rollbacks=pg["rollbacks"])
    for shape, count in (bench.server.sql_census() or {}).items():
        counts[f"sql:{shape}"] = count
    return counts


@dataclass
class Driving:
    """Runs driven one way, one at a time, in blocks: their results with their seconds, and
    what the server did while they ran."""

    answer_waits: bool
    driven: list[RunResult] = field(default_factory=list)
    done: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))

    async def block(
        self, api: Api, bench: Stack, threads: list[str], database: bool = False
    ) -> None:
        """Drive a run on each thread, one at a time; `database`: count the database's work
        too (PostgreSQL's counts settle at both ends, so idle time is counted with it)."""
        before = counters(bench, api, database)
        for thread in threads:
            result = await api.run_to_end(thread, wait=30, answer_waits=self.answer_waits)
            if result.status != "succeeded":
                raise RuntimeError(f"a bench run ended {result.status}: {result.error}")
            self.driven.append(result)
        after = counters(bench, api, database, ending=True)
        for name, value in after.items():
            self.done[name] += value - before.get(name, 0.0)

    def per_step(self, name: str) -> float:
        return self.done[name] / self.done["model_steps"]

    def ratios(self) -> list[float]:
        return [result.seconds / (result.steps * LATENCY) for result in self.driven]

    def sql_per_step(self) -> dict[str, float] | None:
        """The SQL census's statements per model step by verb and table, most frequent first;
        None when the server ran without it."""
        counted = [(name[4:], count) for name, count in self.done.items() if name[:4] == "sql:"]
        if not counted:
            return None
        ordered = sorted(counted, key=lambda item: -item[1])
        return {shape: count / self.done["model_steps"] for shape, count in ordered}


async def warmed_threads(api: Api, bench: Stack, warm_runs: int, runs: int) -> list[str]:
    """`runs` threads of a new agent, for runs measured one at a time once every worker
    process has run a run and `warm_runs` more runs went through the server."""
    agent = await api.create_agent()
    threads = [await api.create_thread(agent) for _ in range(warm_runs + runs)]
    await warm_every_worker(api, agent, bench)
    await Driving(answer_waits=True).block(api, bench, threads[:warm_runs])
    return threads[warm_runs:]


async def run(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    runs = QUICK_RUNS if quick else FULL_RUNS
    with stack(dialect, latency=LATENCY, tool_calls=STEPS_PER_RUN - 1) as bench:
        api = Api(bench.server.base_url, bench.key, connections=8)
        try:
            agent = await api.create_agent()
            threads = [await api.create_thread(agent) for _ in range(5 * runs)]
            # A worker process's first run pays its imports and first builds, once.
            await warm_every_worker(api, agent, bench)
            warmed = len(bench.database.workers_that_ran())
            worker_processes = len(process_tree(bench.server.pid)) - 1
            one = Driving(answer_waits=True)
            await one.block(api, bench, threads[:runs], database=True)
            # The same runs again, profiled: only the split of the CPU comes from them.
            profiler = Profiler(bench.server.pid, out / f"overhead-{dialect}.pyspy.txt", 250)
            profiler.start()
            profiled = Driving(answer_waits=True)
            await profiled.block(api, bench, threads[runs : 2 * runs])
            samples = profiler.stop()
            alternating = await one_against_two_requests(api, bench, threads[2 * runs : 4 * runs])
            floor = await floor_blocks.alternate(
                Driving(answer_waits=True), api, bench, threads[4 * runs :], BLOCK_RUNS, LATENCY
            )
        finally:
            await api.aclose()
    cpu_ms_per_step = 1000 * one.per_step("cpu")
    postgres = dialect == "postgresql"
    seconds = [result.seconds for result in one.driven]
    steps = sum(result.steps for result in one.driven)
    return {
        "scenario": "overhead",
        "db": dialect,
        "runs": runs,
        "model_latency_s": LATENCY,
        "steps_per_run": STEPS_PER_RUN,
        "model_steps": int(one.done["model_steps"]),
        "steps_seen_by_client": steps,
        "worker_processes": worker_processes,
        "warmed_workers": warmed,
        "stalled_waits": sum(result.stalled_waits for result in one.driven),
        "run_seconds_median": statistics.median(seconds),
        "ratio_median": statistics.median(one.ratios()),
        "ratio_mean": sum(seconds) / (steps * LATENCY),
        "ratio_max": max(one.ratios()),
        "server_cpu_ms_per_step": cpu_ms_per_step,
        # The API process's part (HTTP, the tool outputs' write); the rest is the workers'.
        "api_cpu_ms_per_step": 1000 * one.per_step("api_cpu"),
        "requests_per_step": one.per_step("requests"),
        "cpu_ms_per_step_by_part": {
            part: share * cpu_ms_per_step for part, share in shares(samples).items()
        },
        "db_commits_per_step": one.per_step("commits") if postgres else None,
        "db_rollbacks_per_step": one.per_step("rollbacks") if postgres else None,
        # JURU_BENCH_SQL=1: statements on Juru's engine per model step, by verb and table.
        "sql_per_step": one.sql_per_step(),
        # Alternate blocks of runs driven with one request per step and with two (outputs,
        # then `GET ?wait=`), after the runs above.
        "alternating": alternating,
        # Blocks of such runs again, taking turns with blocks of the floor of a step that keeps
        # its outputs on the same kind of database (`bench.scenarios.floor_blocks`).
        "against_floor": floor,
        "profile_samples": sum(samples.values()) if samples else 0,
        # The profiled runs' own figures (py-spy's sampling weighs on them).
        "profiled_cpu_ms_per_step": 1000 * profiled.per_step("cpu"),
        "profiled_ratio_median": statistics.median(profiled.ratios()),
        "profile_error": profiler.error,
    }


async def census(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    """The SQL census on a server of its own (`bench/sql_census.py` counts every statement,
    which weighs on the CPU figures, so the overhead scenario's server runs without it unless
    JURU_BENCH_SQL=1): statements by verb and table per model step, over runs driven as the
    overhead scenario drives them. The counts do not depend on the machine's speed, so a few
    runs are enough."""
    runs = CENSUS_RUNS
    env = {"JURU_BENCH_SQL": "1"}
    with stack(dialect, latency=LATENCY, tool_calls=STEPS_PER_RUN - 1, env=env) as bench:
        api = Api(bench.server.base_url, bench.key, connections=8)
        try:
            agent = await api.create_agent()
            threads = [await api.create_thread(agent) for _ in range(runs)]
            await warm_every_worker(api, agent, bench)
            counted = Driving(answer_waits=True)
            await counted.block(api, bench, threads, database=True)
        finally:
            await api.aclose()
    return {
        "scenario": "census",
        "db": dialect,
        "runs": runs,
        "model_steps": int(counted.done["model_steps"]),
        "sql_per_step": counted.sql_per_step(),
    }


async def one_against_two_requests(
    api: Api, bench: Stack, threads: list[str]
) -> dict[str, dict[str, float]]:
    """Alternate blocks of runs driven with one request per step and with two, half of
    `threads` each: requests, server CPU and API process CPU per step, and the median e2e ratio
    of each kind."""
    one, two = Driving(answer_waits=True), Driving(answer_waits=False)
    half = len(threads) // 2
    for start in range(0, half, BLOCK_RUNS):
        await one.block(api, bench, threads[start : start + BLOCK_RUNS])
        await two.block(api, bench, threads[half + start : half + start + BLOCK_RUNS])
    return {
        kind: {
            "requests_per_step": driving.per_step("requests"),
            "server_cpu_ms_per_step": 1000 * driving.per_step("cpu"),
            "api_cpu_ms_per_step": 1000 * driving.per_step("api_cpu"),
            "ratio_median": statistics.median(driving.ratios()),
        }
        for kind, driving in (("one_request", one), ("two_requests", two))
    }
