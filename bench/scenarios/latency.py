"""Where a model step's latency goes: the overhead scenario's runs, each step taken apart.

The e2e rows compare a run's time with its model calls' (`overhead`), and the CPU profile
splits the server's work, not its waits: neither says where the milliseconds a step adds to
its model call are spent. Here the server runs under `bench/latency_probe.py`, which stamps
the entry and return of the step path's functions in every process of `juru serve`; the fake
model keeps each call's arrival and answer, and the client each request's sending and answer,
all on the machine's monotonic clock. Each step is one request (`tool_outputs?wait=`), from
the client's sending the tool outputs to its having the run at its next pause or end, with one
model call in it. Its time besides that call is cut into the parts of `SEGMENTS`, which add
up to it, and the table gives each part's median over the steps.

A write is split in two: the time inside the database driver's calls (its statements and its
COMMIT, with PostgreSQL's round trips and own work) and the rest of the transaction (Juru,
SQLAlchemy and the driver's Python between them). The stamps cost a few microseconds each,
about fifty a step.

    python -m bench.run --db both --scenarios latency
"""

from __future__ import annotations

import bisect
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.client import Api
from bench.harness import stack
from bench.scenarios.overhead import LATENCY, STEPS_PER_RUN, warmed_threads

PROBE = Path(__file__).resolve().parents[1] / "latency_probe.py"
WAIT = 30.0

# (part of a step, its first point, its last point): each part begins where the one before it
# ended, so the parts add up to the step's time besides its model call (`model` is the fake
# model's arrival and answer, `client` the request's sending and answer; the `db` parts are
# the driver's calls inside a write, and the `python` parts the rest of it).
SEGMENTS: list[tuple[str, str, str]] = [
    ("the request reaches the API process", "client>", "edge>"),
    ("HTTP, key, rate limit, body (API)", "edge>", "service>"),
    ("to the tool outputs' write (API)", "service>", "resume_txn>"),
    ("the tool outputs' write: in the driver", "resume_txn>", "resume_db"),
    ("the tool outputs' write: Python", "resume_db", "resume_txn<"),
    ("the run reaches a worker process", "resume_txn<", "taken>"),
    ("the worker takes the run up", "taken>", "taken<"),
    ("to the checkpoint", "taken<", "thread_state>"),
    ("the checkpoint", "thread_state>", "thread_state<"),
    ("LangGraph to the model call", "thread_state<", "model>"),
    ("the model call is sent", "model>", "model_in"),
    ("the model's answer is read", "model_out", "model<"),
    ("LangGraph to the pause", "model<", "record_step>"),
    ("to the step's write", "record_step>", "step_txn>"),
    ("the step's write: in the driver", "step_txn>", "step_db"),
    ("the step's write: Python", "step_db", "step_txn<"),
    ("the run reaches the API process", "step_txn<", "wait<"),
    ("the answer reaches the client", "wait<", "client<"),
]


@dataclass(frozen=True)
class Stamp:
    at: float
    pid: int
    thread: int
    point: str


def read_stamps(path: Path) -> list[Stamp]:
    stamps = []
    for line in path.read_text().splitlines():
        at, pid, thread, point = line.split()
        # One name for both dialects' writes and transactions.
        point = point.replace("_sqlite", "").replace("_postgresql", "")
        stamps.append(Stamp(float(at), int(pid), int(thread), point))
    return sorted(stamps, key=lambda stamp: stamp.at)


class MissingPoint(Exception):
    """A step's stamps lack a point of the path."""


class Timeline:
    """Every process's stamps in time order, looked up from a time on."""

    def __init__(self, stamps: list[Stamp]) -> None:
        self.stamps = stamps
        self.times = [stamp.at for stamp in stamps]

    def since(self, at: float) -> list[Stamp]:
        return self.stamps[bisect.bisect_left(self.times, at) :]

    def first(self, pid: int, points: tuple[str, ...], after: float) -> Stamp:
        for stamp in self.since(after):
            if stamp.pid == pid and stamp.point in points:
                return stamp
        raise MissingPoint(f"{'/'.join(points)} after {after:.6f} in process {pid}")

    def caller_of(self, model_in: float) -> int:
        """The process whose call of the model was the last to begin before `model_in`."""
        for stamp in reversed(self.stamps[: bisect.bisect_right(self.times, model_in)]):
            if stamp.point == "model>":
                return stamp.pid
        raise MissingPoint("no process called the model")

    def in_driver(self, transaction: Stamp, end: float) -> float:
        """The seconds the thread of a transaction that began at `transaction` spent inside
        the driver's calls until `end`."""
        spent, entered = 0.0, None
        for stamp in self.since(transaction.at):
            if stamp.at > end:
                break
            if stamp.thread != transaction.thread or not stamp.point.startswith("db_"):
                continue
            if stamp.point.endswith(">") and entered is None:
                entered = stamp.at
            elif stamp.point.endswith("<") and entered is not None:
                spent, entered = spent + stamp.at - entered, None
        return spent


def step_points(
    step: Timeline, api: int, asked: float, answered: float, model: tuple[float, float]
) -> dict[str, float]:
    """The times of every point of `SEGMENTS` in one step's request."""
    model_in, model_out = model
    worker = step.caller_of(model_in)
    at = {"client>": asked, "client<": answered, "model_in": model_in, "model_out": model_out}

    def first(name: str, pid: int, points: tuple[str, ...], after: str) -> Stamp:
        found = step.first(pid, points, at[after])
        at[name] = found.at
        return found

    first("edge>", api, ("edge>",), "client>")
    first("service>", api, ("service>",), "edge>")
    resume = first("resume_txn>", api, ("txn>",), "service>")
    first("resume_txn<", api, ("txn<",), "resume_txn>")
    at["resume_db"] = resume.at + step.in_driver(resume, at["resume_txn<"])
    first("taken>", worker, ("handed>", "claim>"), "resume_txn>")
    first("taken<", worker, ("handed<", "claim<"), "taken>")
    first("thread_state>", worker, ("thread_state>",), "taken<")
    first("thread_state<", worker, ("thread_state<",), "thread_state>")
    first("model>", worker, ("model>",), "thread_state<")
    first("model<", worker, ("model<",), "model_out")
    first("record_step>", worker, ("record_step>",), "model<")
    written = first("step_txn>", worker, ("txn>",), "record_step>")
    first("step_txn<", worker, ("txn<",), "step_txn>")
    at["step_db"] = written.at + step.in_driver(written, at["step_txn<"])
    first("wait<", api, ("wait<",), "record_step>")
    return at


def split(
    stamps: list[Stamp],
    api_pid: int,
    requests: list[tuple[float, float]],
    model_calls: list[tuple[float, float]],
) -> tuple[dict[str, list[float]], list[float], int, float]:
    """Each part's milliseconds in every step, each step's milliseconds besides its model
    call, how many steps lacked a point, and the largest difference between a step's time
    and the sum of its parts (none, unless a part is missing from `SEGMENTS`)."""
    parts: dict[str, list[float]] = defaultdict(list)
    totals, missed, unexplained = [], 0, 0.0
    timeline = Timeline(stamps)
    for asked, took in requests:
        answered = asked + took
        calls = [call for call in model_calls if asked <= call[0] and call[1] <= answered]
        if len(calls) != 1:
            missed += 1
            continue
        try:
            at = step_points(timeline, api_pid, asked, answered, calls[0])
        except MissingPoint:
            missed += 1
            continue
        step = [1000 * (at[end] - at[start]) for _, start, end in SEGMENTS]
        for (name, _, _), part in zip(SEGMENTS, step, strict=True):
            parts[name].append(part)
        totals.append(1000 * (took - (calls[0][1] - calls[0][0])))
        unexplained = max(unexplained, abs(totals[-1] - sum(step)))
    return parts, totals, missed, unexplained


async def run(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    runs, warm_runs = (3, 1) if quick else (20, 3)
    result: dict[str, Any] = {"scenario": "latency", "db": dialect, "runs": runs}
    stamps_path = out / f"latency-{dialect}.stamps"
    stamps_path.unlink(missing_ok=True)
    under = [sys.executable, str(PROBE), str(stamps_path), "--"]
    requests: list[tuple[float, float]] = []
    with stack(dialect, latency=LATENCY, tool_calls=STEPS_PER_RUN - 1, under=under) as bench:
        api = Api(bench.server.base_url, bench.key, connections=8)
        try:
            for thread in await warmed_threads(api, bench, warm_runs, runs):
                created = await api.start_run(thread, wait=WAIT)
                driven = await api.drive(created, WAIT, waits=requests)
                if driven.status != "succeeded":
                    raise RuntimeError(f"a bench run ended {driven.status}: {driven.error}")
            model_calls = bench.model.stamps()
            api_pid = bench.server.pid
        finally:
            await api.aclose()
    stamps = read_stamps(stamps_path)
    parts, totals, missed, unexplained = split(stamps, api_pid, requests, model_calls)
    if not totals or missed > len(requests) // 2:
        raise RuntimeError(f"{missed} of {len(requests)} steps lack a point of the path")
    return {
        **result,
        "steps": len(totals),
        "steps_missed": missed,
        "unexplained_ms": unexplained,
        "model_ms": 1000 * LATENCY,
        "step_ms": statistics.median(totals),
        "parts_ms": {name: statistics.median(parts[name]) for name, _, _ in SEGMENTS},
    }
