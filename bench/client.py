"""The bench's client of the Hosted Agents API: it answers every client tool call at once and
waits with `GET /v1/runs/:id?wait=` or follows the run's event stream, never with a sleep
loop."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import aiohttp
import httpx
from httpx_sse import aconnect_sse

from bench.harness import BENCH_MODEL, TOOL_NAME, Stack, process_tree

# What a failed request of the bench client raises (a lane that meets one ends).
REQUEST_ERRORS = (RuntimeError, httpx.HTTPError, aiohttp.ClientError)
# How many rounds of runs `warm_every_worker` drives before it gives up.
WARM_UP_ROUNDS = 10
TERMINAL = frozenset({"succeeded", "failed", "expired", "cancelled"})
TOOL = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "A client tool the bench answers at once",
        "parameters": {"type": "object", "properties": {"step": {"type": "integer"}}},
    },
}


def wait_params(wait: float) -> dict[str, str]:
    """The `?wait=` of a request that waits for a run (none for 0)."""
    return {"wait": str(wait)} if wait else {}


@dataclass
class RunResult:
    status: str
    steps: int
    seconds: float
    stalled_waits: int
    error: str | None
    # Streamed runs: seconds from each timestamped durable event's write to its arrival here.
    event_delays: list[float] = field(default_factory=list)


def event_delay(kind: str, data: dict[str, Any]) -> float | None:
    """How long ago (wall clock, same machine) the server wrote this event: `updated_at` of a
    run view, `created_at` of a message (taken as the write began, so an upper bound)."""
    stamp = data.get("updated_at") if kind == "run.status" else data.get("created_at")
    if not isinstance(stamp, str):
        return None
    return time.time() - datetime.fromisoformat(stamp).timestamp()


class Api:
    """Thin async calls on `/v1`: requests on aiohttp, event streams on httpx (httpx-sse).

    At 200 and more concurrent runs an httpx client took most of a core (its pool looks at
    every connection per request) and limited what the bench could measure; aiohttp's costs a
    third to a half as much per request. Created inside the event loop that uses it.
    """

    def __init__(self, base_url: str, key: str, connections: int = 100) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        self.session = aiohttp.ClientSession(
            base_url=base_url.rstrip("/") + "/",
            headers=headers,
            connector=aiohttp.TCPConnector(limit=connections),
            timeout=aiohttp.ClientTimeout(total=None, sock_read=120.0),
        )
        self.requests = 0  # sent through `_request`, for requests per model step
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self.http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(120.0, pool=600.0),
            limits=limits,
        )

    async def aclose(self) -> None:
        await self.session.close()
        await self.http.aclose()

    async def _json(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        try:
            return await self._request(method, path, **options)
        except aiohttp.ServerDisconnectedError:
            if method != "GET":
                raise
            # A keep-alive connection the server closed as it was reused: a GET is safe again.
            return await self._request(method, path, **options)

    async def _request(self, method: str, path: str, **options: Any) -> dict[str, Any]:
        self.requests += 1
        async with self.session.request(method, path.lstrip("/"), **options) as response:
            if response.status >= 400:
                text = await response.text()
                raise RuntimeError(f"{method} {path}: {response.status} {text}")
            answer: dict[str, Any] = await response.json()
            return answer

    async def create_agent(self, max_steps: int = 20) -> str:
        body = {"name": "bench", "model_id": BENCH_MODEL, "tools": [TOOL], "max_steps": max_steps}
        return str((await self._json("POST", "/v1/agents", json=body))["id"])

    async def create_thread(self, agent_id: str) -> str:
        return str((await self._json("POST", f"/v1/agents/{agent_id}/threads", json={}))["id"])

    async def start_run(self, thread_id: str, text: str = "go", wait: float = 0) -> dict[str, Any]:
        """A new run; with `wait`, as it is at its first pause (or end)."""
        params = wait_params(wait)
        return await self._json(
            "POST", f"/v1/threads/{thread_id}/runs", json={"input": text}, params=params
        )

    async def get_run(self, run_id: str, wait: float = 0) -> dict[str, Any]:
        params = wait_params(wait)
        return await self._json("GET", f"/v1/runs/{run_id}", params=params)

    async def answer(self, run: dict[str, Any], wait: float = 0) -> dict[str, Any]:
        """Post the pending calls' outputs; with `wait`, the answer is the run once it needs
        outputs again or has ended (one request per model step)."""
        outputs = [
            {"tool_call_id": call["id"], "output": '{"ok": true}'}
            for call in run["pending_tool_calls"]
        ]
        params = wait_params(wait)
        return await self._json(
            "POST",
            f"/v1/runs/{run['id']}/tool_outputs",
            json={"outputs": outputs},
            params=params,
        )

    async def drive(
        self,
        run: dict[str, Any],
        wait: float = 30.0,
        stop_at: str | None = None,
        answer_waits: bool = True,
        waits: list[tuple[float, float]] | None = None,
    ) -> RunResult:
        """Follow a run to its end (or to `stop_at`), answering its tool calls at once, as
        Juru's client does: the tool outputs' request waits for the next pause (`?wait=` on
        `tool_outputs`), so a step costs one request (with a run started with `wait`, whose
        creation waits for the first pause). `answer_waits=False` answers without
        waiting and waits with `GET ?wait=`, two requests per step.

        `?wait=` holds the request while the run is queued or running; a wait that runs to its
        full length and still finds the run working is counted as a stall (a slow server, or
        a regression of the wait). Each waiting request's send time (monotonic seconds) and
        duration are appended to `waits` as it ends.
        """
        started = time.monotonic()
        stalls = 0
        waits = [] if waits is None else waits
        while run["status"] not in TERMINAL and run["status"] != stop_at:
            asked = time.monotonic()
            if run["status"] == "requires_action":
                run = await self.answer(run, wait if answer_waits else 0)
                if not answer_waits:
                    continue
            else:
                run = await self.get_run(run["id"], wait)
            took = time.monotonic() - asked
            waits.append((asked, took))
            if took >= wait * 0.95 and run["status"] in ("queued", "running"):
                stalls += 1
        return RunResult(
            run["status"],
            int(run["step_count"]),
            time.monotonic() - started,
            stalls,
            run.get("error"),
        )

    async def run_to_end(
        self,
        thread_id: str,
        wait: float = 30.0,
        answer_waits: bool = True,
        waits: list[tuple[float, float]] | None = None,
    ) -> RunResult:
        """Start a run on the thread and `drive` it to its end. Its seconds count from the
        creation, which waits for the first pause when `answer_waits` (as Juru's client
        does), else answers at once; a waiting creation is appended to `waits` too."""
        started = time.monotonic()
        run = await self.start_run(thread_id, wait=wait if answer_waits else 0)
        if answer_waits and waits is not None:
            waits.append((started, time.monotonic() - started))
        result = await self.drive(run, wait, answer_waits=answer_waits, waits=waits)
        return replace(result, seconds=time.monotonic() - started)

    async def follow(
        self, thread_id: str, text: str = "go", delays: list[float] | None = None
    ) -> RunResult:
        """Start a run with `stream: true` and follow its events to the end, answering each
        pause the stream shows while the stream stays open. Each timestamped event's delay is
        appended to `delays` as it arrives."""
        started = time.monotonic()
        body = {"input": text, "stream": True}
        delays = [] if delays is None else delays
        run: dict[str, Any] = {}
        async with aconnect_sse(
            self.http, "POST", f"/v1/threads/{thread_id}/runs", json=body
        ) as source:
            if source.response.status_code != 200:
                await source.response.aread()
                raise RuntimeError(f"streamed run: {source.response.status_code}")
            async for event in source.aiter_sse():
                if event.event == "message.delta":
                    continue
                data = event.json()
                delay = event_delay(event.event, data)
                if delay is not None:
                    delays.append(delay)
                if event.event != "run.status":
                    continue
                run = data
                if run["status"] == "requires_action":
                    await self.answer(run)
                elif run["status"] in TERMINAL:
                    break
        return RunResult(
            str(run.get("status")),
            int(run.get("step_count", 0)),
            time.monotonic() - started,
            0,
            run.get("error"),
            delays,
        )


@dataclass
class LaneTotals:
    """What a set of lanes did: runs ended by status, model steps, stalled waits, errors."""

    runs: int = 0
    succeeded: int = 0
    steps: int = 0
    stalled_waits: int = 0
    errors: int = 0
    last_error: str = ""
    # Each waiting request of the lanes: when it was sent (monotonic seconds), how long it took.
    waits: list[tuple[float, float]] = field(default_factory=list)

    def add(self, result: RunResult) -> None:
        self.runs += 1
        self.succeeded += result.status == "succeeded"
        self.steps += result.steps
        self.stalled_waits += result.stalled_waits
        if result.status != "succeeded":
            self.errors += 1
            self.last_error = f"{result.status}: {result.error}"


async def lane(api: Api, thread_id: str, totals: LaneTotals, wait: float) -> None:
    """Run runs back to back on one thread until cancelled; a failed request ends the lane."""
    while True:
        try:
            result = await api.run_to_end(thread_id, wait, waits=totals.waits)
        except REQUEST_ERRORS as error:
            totals.errors += 1
            totals.last_error = f"{type(error).__name__}: {error}"[:300]
            return
        totals.add(result)


async def warm_every_worker(api: Api, agent: str, bench: Stack) -> None:
    """Drive runs to their end until every worker process has executed one. A process's first
    run pays for what it does once (imports of the model client, graphs, pools, caches) and
    grows its heap: a figure of steady work (CPU per step, the RSS of parked runs) starts
    after it. Runs go to whichever worker claims first, so a round may miss one."""
    processes = max(1, len(process_tree(bench.server.pid)) - 1)  # without the API process
    for _ in range(WARM_UP_ROUNDS):
        threads = [await api.create_thread(agent) for _ in range(2 * processes)]
        runs = [await api.start_run(thread) for thread in threads]
        await asyncio.gather(*(api.drive(run) for run in runs))
        if len(bench.database.workers_that_ran()) >= processes:
            return
    raise RuntimeError(f"{WARM_UP_ROUNDS} rounds of warm-up runs missed a worker process")
