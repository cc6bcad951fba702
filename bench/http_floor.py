"""The HTTP a hosted step cannot do without, with nothing behind it: a floor for its CPU.

A client-tool step of a hosted run takes two requests: the tool outputs posted, and the `GET`
that waits for the run's next pause. This app answers the same two routes on FastAPI and
uvicorn with uvicorn's defaults and its access log, as `juru serve` does, but with no work
behind them (no key, no database, no run): what the server spends on them is what any
FastAPI server would spend on one step's HTTP on this machine.

`python -m bench.http_floor --port N` serves it; `measure()` drives it from this process.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel

from tests.support.server import ServerProcess, free_port

app = FastAPI()


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
async def tool_outputs(run_id: str, body: ToolOutputs) -> RunView:
    return RunView(id=run_id, status="running", step_count=len(body.outputs))


@app.get("/v1/runs/{run_id}")
async def get_run(run_id: str, wait: int | None = None) -> RunView:
    call = {"id": "call_1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    return RunView(id=run_id, status="requires_action", step_count=1, pending_tool_calls=[call])


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


def measure(log: Path, pairs: int) -> float:
    """Server CPU milliseconds per pair of requests (tool outputs, then the waiting `GET`)."""
    port = free_port()
    command = [sys.executable, "-m", "bench.http_floor", "--port", str(port)]
    server = ServerProcess(command, port, {}, log).start()
    assert server.process is not None
    body = {"outputs": [{"tool_call_id": "call_1", "output": '{"ok": true}'}]}
    headers = {"Authorization": "Bearer juru_live_bench"}
    try:
        with httpx.Client(base_url=server.base_url, headers=headers) as client:

            def pair() -> None:
                client.post("/v1/runs/run_1/tool_outputs", json=body).raise_for_status()
                client.get("/v1/runs/run_1", params={"wait": 30}).raise_for_status()

            for _ in range(20):
                pair()  # warm-up
            before = run_seconds(server.process.pid)
            for _ in range(pairs):
                pair()
            used = run_seconds(server.process.pid) - before
    finally:
        server.stop()
    return 1000 * used / pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    arguments = parser.parse_args()
    uvicorn.run(app, host="127.0.0.1", port=arguments.port, log_level="info")


if __name__ == "__main__":
    main()
