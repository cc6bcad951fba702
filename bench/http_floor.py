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

With `--store` (a SQLite file or a PostgreSQL URL), the app also writes each request's tool
outputs before it answers: one row, one transaction, committed and synced as Juru commits the
outputs a client sends (SQLite in WAL mode with `synchronous=FULL`, PostgreSQL's own commit),
and on the event loop itself, with no thread to hand it to. A hosted run must keep the outputs
it was sent before it goes on (a crash after the request must not lose them), so this is the
least a step's request can cost with them kept: a floor that takes no hop to a worker, no
claim, no log, no hold. With `--hop` as well, the app hands each request to a second process
and waits for it to hand it back before answering, as a hosted step goes from the API process
to a worker and back: the least that serving HTTP in one process and running runs in another
adds to a step (the second process does nothing but send the message back).

`python -m bench.http_floor --port N [--store URL] [--hop]` serves it; `measure()` drives it
from this process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import uvicorn
from fastapi import FastAPI, Response
from pydantic import BaseModel

from bench.harness import process_tree
from tests.support.server import ServerProcess, free_port

app = FastAPI()
WARM_UP_STEPS = 20
# How the app keeps a request's outputs (`--store`), or None: it keeps nothing.
keep_outputs: Callable[[str, str], None] | None = None
OUTPUTS_TABLE = "floor_tool_outputs"
# The socket to the second process that sends each request back (`--hop`), or None.
hop_socket: socket.socket | None = None
HOP_HEADER = "x-floor-hop"


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
async def tool_outputs(
    run_id: str, body: ToolOutputs, response: Response, wait: int | None = None
) -> RunView:
    """The run at its next pause, as a hosted run's `?wait=` answers it; after a hop, with the
    id of the process that sent the request back (header `HOP_HEADER`)."""
    if keep_outputs is not None:
        keep_outputs(run_id, json.dumps([output.model_dump() for output in body.outputs]))
    if hop_socket is not None:
        loop = asyncio.get_running_loop()
        await loop.sock_sendall(hop_socket, run_id.encode())
        response.headers[HOP_HEADER] = (await loop.sock_recv(hop_socket, 4096)).decode()
    call = {"id": "call_1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    steps = len(body.outputs)
    return RunView(id=run_id, status="requires_action", step_count=steps, pending_tool_calls=[call])


def sqlite_keeper(path: str) -> Callable[[str, str], None]:
    """Each call commits one row to the SQLite file at `path`, synced to the disk."""
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute(f"CREATE TABLE IF NOT EXISTS {OUTPUTS_TABLE} (run_id TEXT, outputs TEXT)")

    def keep(run_id: str, outputs: str) -> None:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute(f"INSERT INTO {OUTPUTS_TABLE} VALUES (?, ?)", (run_id, outputs))
        connection.execute("COMMIT")

    return keep


def postgres_keeper(url: str) -> Callable[[str, str], None]:
    """Each call commits one row to the PostgreSQL database at `url` (one statement, its own
    transaction: one round trip)."""
    import psycopg

    connection = psycopg.connect(url, autocommit=True)
    connection.execute(f"CREATE TABLE IF NOT EXISTS {OUTPUTS_TABLE} (run_id TEXT, outputs JSONB)")
    insert = f"INSERT INTO {OUTPUTS_TABLE} VALUES (%s, %s)"

    def keep(run_id: str, outputs: str) -> None:
        connection.execute(insert, (run_id, outputs), prepare=True)

    return keep


def start_hop() -> socket.socket:
    """Fork the second process of `--hop`: it answers every message it gets with its process
    id, until this process closes its end. Returns this process's end, non-blocking."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        ours.close()
        while theirs.recv(4096):
            theirs.send(str(os.getpid()).encode())
        os._exit(0)
    theirs.close()
    ours.setblocking(False)
    return ours


def keeper(store: str) -> Callable[[str, str], None]:
    """The writer of `--store`: a PostgreSQL URL, else a SQLite file's path."""
    if store.startswith("postgresql://"):
        return postgres_keeper(store)
    return sqlite_keeper(store)


@dataclass(frozen=True)
class HttpStep:
    """A step's request on the empty app: the server's CPU for it, and the median time from
    the client's building of the request (the outputs of the pause it was last answered) to
    its reading of the answer; the seconds the measured steps took, their waits included; and
    how many of them came back through a second process (`--hop`)."""

    cpu_ms: float
    wall_ms: float
    seconds: float
    hopped: int = 0


def run_seconds(pid: int) -> float:
    """Seconds the threads of the process and of its descendants have run on a CPU, counted
    in nanoseconds by the scheduler (`/proc/<pid>/task/*/schedstat`). The clock-tick counts
    of `/proc/<pid>/stat` can miss a server that runs in short bursts in step with its one
    client: they charge a tick to the process on the CPU at that instant, and the pattern here
    can keep the server off it."""
    total = 0
    for process in process_tree(pid):
        with contextlib.suppress(FileNotFoundError):
            for task in Path(f"/proc/{process}/task").iterdir():
                with contextlib.suppress(FileNotFoundError):
                    total += int((task / "schedstat").read_text().split()[0])
    return total / 1e9


async def measure(
    log: Path, steps: int, pause: float = 0.0, store: str | None = None, hop: bool = False
) -> HttpStep:
    """Drive the app for `steps` steps after a warm-up, one request per step, as the bench's
    client drives a hosted run (`bench.client.Api`), `pause` seconds apart (the model call's
    time, in a hosted step); with `store`, the app keeps each request's outputs there, and with
    `hop` it hands each request to a second process and back."""
    port = free_port()
    command = [sys.executable, "-m", "bench.http_floor", "--port", str(port)]
    if store is not None:
        command += ["--store", store]
    if hop:
        command.append("--hop")
    server = ServerProcess(command, port, {}, log).start()
    assert server.process is not None
    headers = {"Authorization": "Bearer juru_live_bench"}
    run: dict[str, Any] = {"id": "run_1", "pending_tool_calls": [{"id": "call_1"}]}
    # The processes other than the server's own that sent a measured request back.
    hopped_through: list[str] = []
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
                    hopped_through.append(response.headers.get(HOP_HEADER, ""))

            for _ in range(WARM_UP_STEPS):
                await step()
            hopped_through.clear()
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
    own = str(server.process.pid)
    hopped = sum(1 for pid in hopped_through if pid not in ("", own))
    return HttpStep(1000 * used / steps, 1000 * statistics.median(times), seconds, hopped)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", help="a SQLite file or a PostgreSQL URL to keep outputs in")
    parser.add_argument("--hop", action="store_true", help="hand each request to a 2nd process")
    arguments = parser.parse_args()
    global keep_outputs, hop_socket
    if arguments.hop:
        hop_socket = start_hop()  # before any connection or thread is opened
    if arguments.store is not None:
        keep_outputs = keeper(arguments.store)
    uvicorn.run(app, host="127.0.0.1", port=arguments.port, log_level="info")


if __name__ == "__main__":
    main()
