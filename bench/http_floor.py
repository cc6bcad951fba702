"""The HTTP a hosted step cannot do without, with nothing behind it: a floor for its CPU and
for its time end to end.

A client-tool step of a hosted run takes one request: the tool outputs posted with `?wait=`,
answered with the run at its next pause. This app answers that route on FastAPI and uvicorn
with uvicorn's defaults and its access log, as `juru serve` does, but with no work behind it
(no key, no database, no run), and the bench's own client drives it as it drives a hosted
run (aiohttp, the outputs built from the pause it was answered), with the model call's wait
between steps or without: what the server spends on a request is what any FastAPI server
would spend on a step's HTTP on this machine, and the time from the request's building to its
answer read is what the step's HTTP adds to its time end to end. The wait matters on a virtual
machine: a request that finds both processes idle for 200 ms took 1.9 ms here, against 0.45
ms back to back (bench/RESULTS.md, twenty-fifth round).

`python -m bench.http_floor --port N` serves it; `measure()` drives it from this process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

from tests.support.server import ServerProcess, free_port

app = FastAPI()
WARM_UP_STEPS = 20


class ToolOutput(BaseModel):
    tool_call_id: str
    output: str


class ToolOutputs(BaseModel):
    outputs: list[ToolOutput]


class RunView(BaseModel):
    id: str
    status: str
    step_count: int
    pending_tool_calls: list[dict[str, Any]] | None = None


@app.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@app.post("/v1/runs/{run_id}/tool_outputs")
async def tool_outputs(run_id: str, body: ToolOutputs, wait: int | None = None) -> RunView:
    """The run at its next pause, as a hosted run's `?wait=` answers it."""
    call = {"id": "call_1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    steps = len(body.outputs)
    return RunView(id=run_id, status="requires_action", step_count=steps, pending_tool_calls=[call])


@dataclass(frozen=True)
class HttpStep:
    """A step's request on the empty app: the server's CPU for it, and the median time from
    the client's building of the request (the outputs of the pause it was last answered) to
    its reading of the answer; and the seconds the measured steps took, their waits included."""

    cpu_ms: float
    wall_ms: float
    seconds: float


def run_seconds(pid: int) -> float:
    """Time the process's threads have run on a CPU, in nanoseconds from the scheduler
    (`/proc/<pid>/task/*/schedstat`). The clock-tick counts of `/proc/<pid>/stat` can miss a
    server that runs in short bursts in step with its one client: they charge a tick to the
    process on the CPU at that instant, and the pattern here can keep the server off it."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):
            total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


async def measure(log: Path, steps: int, pause: float = 0.0) -> HttpStep:
    """Drive the app for `steps` steps after a warm-up, one request per step, as the bench's
    client drives a hosted run (`bench.client.Api`), `pause` seconds apart (the model call's
    time, in a hosted step)."""
    port = free_port()
    command = [sys.executable, "-m", "bench.http_floor", "--port", str(port)]
    server = ServerProcess(command, port, {}, log).start()
    assert server.process is not None
    headers = {"Authorization": "Bearer juru_live_bench"}
    run: dict[str, Any] = {"id": "run_1", "pending_tool_calls": [{"id": "call_1"}]}
    try:
        async with aiohttp.ClientSession(base_url=server.base_url + "/", headers=headers) as client:

            async def step() -> None:
                nonlocal run
                outputs = [
                    {"tool_call_id": call["id"], "output": '{"ok": true}'}
                    for call in run["pending_tool_calls"]
                ]
                async with client.post(
                    f"v1/runs/{run['id']}/tool_outputs",
                    json={"outputs": outputs},
                    params={"wait": "30"},
                ) as response:
                    response.raise_for_status()
                    run = await response.json()

            for _ in range(WARM_UP_STEPS):
                await step()
            before, started = run_seconds(server.process.pid), time.perf_counter()
            times = []
            for _ in range(steps):
                if pause:
                    await asyncio.sleep(pause)
                sent = time.perf_counter()
                await step()
                times.append(time.perf_counter() - sent)
            used = run_seconds(server.process.pid) - before
            seconds = time.perf_counter() - started
    finally:
        server.stop()
    return HttpStep(1000 * used / steps, 1000 * statistics.median(times), seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    arguments = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=arguments.port, log_level="info")


if __name__ == "__main__":
    main()
