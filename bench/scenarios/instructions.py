"""Instructions per model step: the overhead scenario's runs counted by valgrind's callgrind.

The CPU figures drift with the machine: on the bench's two-CPU virtual machines the same code
read 13.7 and 17.9 ms a step half an hour apart, and loaded runs 15.4 and 18.9 ms a few
minutes apart (bench/RESULTS.md, thirty-third and thirty-fourth rounds), far more than most
changes to the step path gain or lose. An instruction count does not drift: callgrind counts
the instructions each of the server's processes runs, whatever else the machine does (two
counts of the same code differ by under 1%), so two commits compare in any sitting.

The server runs under callgrind with its counting off while it starts and warms (valgrind
alone makes it about five times slower), then on for the measured runs, driven one at a time
as the overhead scenario drives them (one request a step), each process's count dumped at
the end. Counting makes the server some fifty times slower, so the model answers at once and
leases are long: the count does not depend on either. `PYTHONHASHSEED` is fixed, so that
dictionaries and sets are built the same way in every sitting. PostgreSQL's own processes are
not counted.

    python -m bench.run --db both --scenarios instructions
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

from bench.client import Api
from bench.harness import process_tree, stack
from bench.scenarios.overhead import STEPS_PER_RUN, Driving, warmed_threads

# A step's work, not its waits, is counted: the model answers at once.
LATENCY = 0.0
# Under callgrind a step takes about a second of CPU: leases that outlast it.
SLOW_SERVER = {"JURU_LEASE_SECONDS": "600", "PYTHONHASHSEED": "0"}
DUMP = "measured"
# (measured runs, warm runs after every worker's first) in quick mode and in a full run.
QUICK_RUNS, FULL_RUNS = (2, 1), (10, 3)
TOTALS = re.compile(r"^(?:summary|totals):\s+(\d+)", re.MULTILINE)


def missing() -> str | None:
    """Why instructions cannot be counted here (None when valgrind is installed)."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return "valgrind is not installed (apt-get install valgrind)"
    return None


async def run(dialect: str, quick: bool, out: Path) -> dict[str, Any]:
    runs, warm_runs = QUICK_RUNS if quick else FULL_RUNS
    result: dict[str, Any] = {"scenario": "instructions", "db": dialect, "runs": runs}
    error = missing()
    if error is not None:
        return {**result, "error": error}
    counts = out / f"callgrind-{dialect}"
    shutil.rmtree(counts, ignore_errors=True)
    counts.mkdir(parents=True)
    callgrind = [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        "--trace-children=yes",
        f"--callgrind-out-file={counts}/callgrind.%p",
    ]
    with stack(
        dialect,
        latency=LATENCY,
        tool_calls=STEPS_PER_RUN - 1,
        env=SLOW_SERVER,
        under=callgrind,
    ) as bench:
        api = Api(bench.server.base_url, bench.key, connections=8)
        try:
            threads = await warmed_threads(api, bench, warm_runs, runs)
            processes = process_tree(bench.server.pid)
            for pid in processes:
                _control("--instr=on", pid)
                _control("--zero", pid)
            counted = Driving(answer_waits=True)
            await counted.block(api, bench, threads)
            by_process = {pid: _dumped(counts, pid) for pid in processes}
        finally:
            await api.aclose()
    steps = counted.done["model_steps"]
    api_pid = processes[0]
    return {
        **result,
        "model_steps": int(steps),
        "processes": len(processes),
        "instructions_per_step": sum(by_process.values()) / steps,
        "api_instructions_per_step": by_process[api_pid] / steps,
    }


def _control(option: str, pid: int) -> str:
    done = subprocess.run(
        ["callgrind_control", option, str(pid)], capture_output=True, text=True, check=True
    )
    return done.stdout


def _dumped(counts: Path, pid: int) -> int:
    """The instructions process `pid` ran since its counters were zeroed: dumped now (its
    dump is the file callgrind marks with this trigger; one written at the process's exit
    would not be)."""
    _control(f"--dump={DUMP}", pid)
    dumps = [
        path
        for path in counts.glob(f"callgrind.{pid}.*")
        if f"Trigger: dump {DUMP}" in path.read_text(errors="replace")
    ]
    if len(dumps) != 1:
        raise RuntimeError(f"callgrind wrote {len(dumps)} dumps for process {pid}")
    match = TOTALS.search(dumps[0].read_text())
    if match is None:
        raise RuntimeError(f"no instruction total in the dump of process {pid}")
    return int(match.group(1))
