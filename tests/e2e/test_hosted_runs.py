"""The Hosted Agents API (`/v1`) against real `juru serve` and `juru worker` processes.

Client-executed tools end to end (on the demo model and on an OpenAI-compatible server), a
server killed with SIGKILL in the middle of a model call, and two worker processes sharing
runs on PostgreSQL. Nothing here sleeps to synchronise: runs are awaited with
`GET /v1/runs/:id?wait=`, everything else is polled against a deadline.

One account's ids answering 404 to another account is not tested here: until API keys arrive
there is only the local account over HTTP (the service tests cover it).
"""

from __future__ import annotations

import json
import os
import re
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, select

from juru.store.tables import runs
from juru.store.urls import DatabaseUrl
from tests.support.hosted import AGENT_FIELDS, RUN_FIELDS, WEATHER_TOOL, demo_answer
from tests.support.server import REPO, ServerProcess, api_key, free_port, juru_command

pytestmark = pytest.mark.e2e

TERMINAL = {"succeeded", "failed", "expired", "cancelled"}
RUN_DEADLINE_SECONDS = 60.0
FAKE_MODEL = "openai/gpt-4o-mini"


# --- processes -------------------------------------------------------------------------------


class FakeOpenAIProcess:
    """`python -m tests.support.fake_openai` as its own process, scripted over HTTP."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    @property
    def root(self) -> str:
        return self.base_url.removesuffix("/v1")

    def start(self, deadline_seconds: float = 30.0) -> FakeOpenAIProcess:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tests.support.fake_openai", "--port", "0"],
                cwd=REPO,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,
            )
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            if not selector.select(deadline_seconds):
                self.stop()
                raise RuntimeError(f"the fake OpenAI server did not start:\n{self.output()}")
        line = self.process.stdout.readline().decode()
        if not line.startswith("LISTENING "):
            self.stop()
            raise RuntimeError(f"the fake OpenAI server said {line!r}:\n{self.output()}")
        self.base_url = line.split(maxsplit=1)[1].strip()
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def env(self) -> dict[str, str | None]:
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": "test-key"}

    def script(self, replies: list[dict[str, Any]]) -> None:
        response = httpx.post(f"{self.root}/_control/script", json={"replies": replies})
        assert response.status_code == 200, response.text

    def requests(self) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.root}/_control/requests")
        assert response.status_code == 200, response.text
        recorded: list[dict[str, Any]] = response.json()
        return recorded

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()


def juru_serve(
    database_url: str, log: Path, port: int | None = None, **env: str | None
) -> ServerProcess:
    """`juru serve` on `database_url` (not started yet)."""
    server_env = {
        "JURU_DATABASE_URL": database_url,
        "JURU_WORKERS": "4",
        "JURU_WORKER_PROCESSES": "1",
        "JURU_INSTANCE_NAME": None,
        "PLAYGROUND_ENABLED": None,
        **env,
    }
    return ServerProcess([*juru_command(), "serve"], port or free_port(), server_env, log)


def until(
    condition: Callable[[], Any], what: str, deadline_seconds: float = RUN_DEADLINE_SECONDS
) -> Any:
    """Poll `condition` until it returns something truthy, failing after the deadline."""
    deadline = time.monotonic() + deadline_seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)  # polling against a deadline, not synchronising
    pytest.fail(f"timed out after {deadline_seconds}s waiting for {what}")


# --- the API ---------------------------------------------------------------------------------


class Api:
    """`/v1` over HTTP, with a key of the database's account (see `api_key`)."""

    def __init__(self, base_url: str, key: str) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=60)

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.http.close()

    def create_agent(self, **body: Any) -> dict[str, Any]:
        response = self.http.post("/v1/agents", json={"name": "Cuaca", **body})
        assert response.status_code == 201, response.text
        agent: dict[str, Any] = response.json()
        return agent

    def create_thread(self, agent_id: str) -> dict[str, Any]:
        response = self.http.post(f"/v1/agents/{agent_id}/threads", json={})
        assert response.status_code == 201, response.text
        thread: dict[str, Any] = response.json()
        return thread

    def post_run(self, thread_id: str, text: str, key: str | None = None) -> httpx.Response:
        headers = {"Idempotency-Key": key} if key else {}
        return self.http.post(
            f"/v1/threads/{thread_id}/runs", json={"input": text}, headers=headers
        )

    def create_run(self, thread_id: str, text: str, key: str | None = None) -> dict[str, Any]:
        response = self.post_run(thread_id, text, key)
        assert response.status_code == 202, response.text
        run: dict[str, Any] = response.json()
        return run

    def run(self, run_id: str, wait: float = 0) -> dict[str, Any]:
        response = self.http.get(f"/v1/runs/{run_id}", params={"wait": wait} if wait else None)
        assert response.status_code == 200, response.text
        run: dict[str, Any] = response.json()
        return run

    def wait_for(self, run_id: str, status: str) -> dict[str, Any]:
        """The run once it is in `status` (it must not end in another status first)."""
        deadline = time.monotonic() + RUN_DEADLINE_SECONDS
        run = self.run(run_id)
        while run["status"] != status:
            assert run["status"] not in TERMINAL, f"run ended {run['status']}, not {status}: {run}"
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"run still {run['status']}, not {status}: {run}"
            run = self.run(run_id, wait=min(10.0, remaining))
        return run

    def messages(self, thread_id: str) -> list[dict[str, Any]]:
        response = self.http.get(f"/v1/threads/{thread_id}/messages")
        assert response.status_code == 200, response.text
        page = response.json()
        assert page["has_more"] is False
        messages: list[dict[str, Any]] = page["data"]
        return messages

    def runs_of(self, thread_id: str) -> list[dict[str, Any]]:
        response = self.http.get(f"/v1/threads/{thread_id}/runs")
        assert response.status_code == 200, response.text
        found: list[dict[str, Any]] = response.json()["data"]
        return found


class Database:
    """Reads straight from the server's database, around the API."""

    def __init__(self, database_url: str) -> None:
        self.url = DatabaseUrl.parse(database_url)
        self.engine = create_engine(self.url.sync_url())

    def close(self) -> None:
        self.engine.dispose()

    def runs(self) -> dict[str, tuple[str, int]]:
        """Every run's status and `attempts` (how many times a worker claimed it)."""
        with self.engine.connect() as connection:
            rows = connection.execute(select(runs.c.id, runs.c.status, runs.c.attempts)).all()
        return {run_id: (status, attempts) for run_id, status, attempts in rows}

    def attempts(self) -> dict[str, int]:
        return {run_id: attempts for run_id, (_, attempts) in self.runs().items()}

    def listeners(self) -> int:
        """Backends listening for run events (each Juru process on PostgreSQL holds one)."""
        with self.engine.connect() as connection:
            count = connection.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %(name)s"
                " AND query LIKE 'LISTEN %%'",
                {"name": self.url.url.database},
            ).scalar_one()
        return int(count)


# --- 1. the walkthrough ----------------------------------------------------------------------


def walkthrough(api: Api, model_id: str, weather: str) -> dict[str, Any]:
    """Agent, thread, run, the tool executed here, the answer; returns the finished run."""
    agent = api.create_agent(
        model_id=model_id,
        system_prompt="Kamu asisten cuaca.",
        tools=[WEATHER_TOOL],
        max_steps=20,
    )
    assert set(agent) == AGENT_FIELDS
    assert re.fullmatch(r"agt_\w+", agent["id"])
    assert agent["name"] == "Cuaca"
    assert agent["model_id"] == model_id
    assert agent["system_prompt"] == "Kamu asisten cuaca."
    assert agent["tools"] == [WEATHER_TOOL]
    assert agent["builtin_tools"] == []
    assert agent["max_steps"] == 20

    thread = api.create_thread(agent["id"])
    assert re.fullmatch(r"thr_\w+", thread["id"])
    assert thread["agent_id"] == agent["id"]

    key = f"walkthrough-{uuid.uuid4().hex}"
    created = api.create_run(thread["id"], "Cuaca di Jakarta?", key)
    assert set(created) == RUN_FIELDS  # no `output` before the run succeeded
    assert re.fullmatch(r"run_\w+", created["id"])
    assert created["thread_id"] == thread["id"]
    assert created["agent_id"] == agent["id"]
    assert created["status"] == "queued"
    assert created["step_count"] == 0
    assert created["max_steps"] == 20
    assert created["cost_rupiah"] == 0
    assert created["pending_tool_calls"] is None
    assert created["error"] is None

    waiting = api.wait_for(created["id"], "requires_action")
    [call] = waiting["pending_tool_calls"]
    assert set(call) == {"id", "name", "arguments"}
    assert call["id"]
    assert call["name"] == "get_weather"
    assert isinstance(call["arguments"], str)
    assert json.loads(call["arguments"]) == {"city": "Jakarta"}
    assert waiting["step_count"] == 1
    assert "output" not in waiting

    # The client executes the tool itself: here, by making up the weather.
    outputs = [{"tool_call_id": call["id"], "output": weather}]
    submitted = api.http.post(f"/v1/runs/{created['id']}/tool_outputs", json={"outputs": outputs})
    assert submitted.status_code == 200, submitted.text
    assert submitted.json()["status"] in {"running", "requires_action"}
    if submitted.json()["status"] == "running":
        assert submitted.json()["pending_tool_calls"] is None

    done = api.wait_for(created["id"], "succeeded")
    assert done["error"] is None
    assert done["pending_tool_calls"] is None
    assert done["step_count"] == 2
    assert done["output"]

    messages = api.messages(thread["id"])
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert {m["run_id"] for m in messages} == {created["id"]}
    assert {m["thread_id"] for m in messages} == {thread["id"]}
    assert len({m["id"] for m in messages}) == len(messages)
    user, asked, answered, final = messages
    assert user["content"] == "Cuaca di Jakarta?"
    assert asked["tool_calls"] == [call]
    assert answered["tool_call_id"] == call["id"]
    assert answered["name"] == "get_weather"
    assert answered["content"] == weather
    assert final["tool_calls"] is None
    assert final["content"] == done["output"]

    again = api.post_run(thread["id"], "Cuaca di Jakarta?", key)
    assert again.status_code == 202, again.text
    assert again.json()["id"] == created["id"]
    assert again.json()["status"] == "succeeded"
    assert [run["id"] for run in api.runs_of(thread["id"])] == [created["id"]]
    assert len(api.messages(thread["id"])) == 4
    return done


def test_walkthrough_on_the_demo_model(database_url: str, tmp_path: Path) -> None:
    weather = "Jakarta: 31°C, berawan, kelembapan 78%"
    with (
        juru_serve(database_url, tmp_path / "server.log") as server,
        Api(server.base_url, api_key(database_url)) as api,
    ):
        done = walkthrough(api, "juru/demo", weather)
    # The demo model answers with a sentence quoting the single tool result it was given.
    assert done["output"] == demo_answer("get_weather", weather)


def test_walkthrough_on_an_openai_compatible_server(
    database_url: str, tmp_path: Path, fake_openai_process: FakeOpenAIProcess
) -> None:
    fake = fake_openai_process
    weather = "Jakarta: 29°C, hujan ringan"
    answer = "Di Jakarta sekarang 29°C dan hujan ringan. Bawa payung!"
    fake.script(
        [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Jakarta"}}]},
            {"content": answer},
        ]
    )
    server = juru_serve(database_url, tmp_path / "server.log", **fake.env())
    with server, Api(server.base_url, api_key(database_url)) as api:
        done = walkthrough(api, FAKE_MODEL, weather)
    assert done["output"] == answer

    first, second = fake.requests()
    assert first["model"] == "gpt-4o-mini"
    assert [tool["function"]["name"] for tool in first["tools"]] == ["get_weather"]
    assert [(m["role"], m["content"]) for m in first["messages"]] == [
        ("system", "Kamu asisten cuaca."),
        ("user", "Cuaca di Jakarta?"),
    ]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    [call] = second["messages"][2]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert json.loads(call["function"]["arguments"]) == {"city": "Jakarta"}
    tool_result = second["messages"][3]
    assert tool_result["tool_call_id"] == call["id"]
    assert tool_result["content"] == weather


# --- 2. kill -9 in the middle of a model call ------------------------------------------------


def test_a_run_survives_kill_9_of_its_server_mid_model_call(
    database_url: str,
    database: Database,
    tmp_path: Path,
    fake_openai_process: FakeOpenAIProcess,
) -> None:
    fake = fake_openai_process
    fake.script([{"content": "this answer never arrives", "delay": 30}])
    env = {**fake.env(), "JURU_LEASE_SECONDS": "2"}
    port = free_port()
    first = juru_serve(database_url, tmp_path / "first.log", port, **env).start()
    try:
        key = api_key(database_url)
        with Api(first.base_url, key) as api:
            agent = api.create_agent(model_id=FAKE_MODEL, max_steps=5)
            thread = api.create_thread(agent["id"])
            run = api.create_run(thread["id"], "Ceritakan sesuatu tentang Jakarta.")
            until(fake.requests, "the model call of the first server")
            assert api.run(run["id"])["status"] == "running"
    finally:
        first.kill()

    answer = "Jakarta adalah ibu kota yang ramai."
    fake.script([{"content": answer}])
    second = juru_serve(database_url, tmp_path / "second.log", port, **env)
    with second, Api(second.base_url, key) as api:
        restarted = time.monotonic()
        done = api.wait_for(run["id"], "succeeded")
        # Taken over once the 2 s lease (JURU_LEASE_SECONDS) expired, not the default 30 s.
        assert time.monotonic() - restarted < 15
        assert done["output"] == answer
        assert done["error"] is None
        assert done["step_count"] == 1
        assert [r["id"] for r in api.runs_of(thread["id"])] == [run["id"]]
        messages = api.messages(thread["id"])

    # The model was asked twice (the killed call, then the retry), with the same conversation:
    # the retry did not repeat the input.
    killed, retried = fake.requests()
    assert retried["messages"] == killed["messages"]
    assert [m["role"] for m in retried["messages"]] == ["user"]
    # The transcript holds each message once: the input, then the one answer.
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert len({m["id"] for m in messages}) == 2
    assert messages[0]["content"] == "Ceritakan sesuatu tentang Jakarta."
    assert messages[1]["content"] == answer
    assert {m["run_id"] for m in messages} == {run["id"]}
    # Claimed by the killed server, then once more by the new one after the lease expired.
    assert database.attempts() == {run["id"]: 2}


# --- 3. two worker processes sharing runs ----------------------------------------------------

RUN_COUNT = 100
TOOK_RUN = re.compile(r"worker (\S+) took run (run_\w+) \(attempt (\d+)\)")


class WorkerProcess:
    """`juru worker` (no HTTP port): started with Popen, stopped with SIGTERM."""

    def __init__(self, database_url: str, log: Path) -> None:
        self.log = log
        env = {**os.environ, "JURU_DATABASE_URL": database_url, "JURU_WORKERS": "4"}
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                [*juru_command(), "worker"],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


@pytest.mark.postgresql
def test_two_worker_processes_share_runs_each_executed_once(
    fresh_postgres_url: str, tmp_path: Path
) -> None:
    database_url = fresh_postgres_url
    database = Database(database_url)
    workers: list[WorkerProcess] = []
    # Hundreds of requests in a few seconds: a budget far above the default 120 a minute.
    roomy = '{"paid": "100000/minute"}'
    server = juru_serve(
        database_url, tmp_path / "api.log", JURU_WORKERS="0", JURU_TIER_RATE_LIMITS=roomy
    )
    with server, Api(server.base_url, api_key(database_url)) as api:
        try:
            workers = [WorkerProcess(database_url, tmp_path / f"worker{i}.log") for i in (1, 2)]
            # Both workers listen for work before the first run is created (the API too).
            until(lambda: database.listeners() >= 3, "both workers to listen for work")
            agent = api.create_agent(model_id="juru/demo")

            def start_one(index: int) -> tuple[str, str]:
                thread = api.create_thread(agent["id"])
                return thread["id"], api.create_run(thread["id"], f"Halo nomor {index}")["id"]

            with ThreadPoolExecutor(max_workers=8) as pool:
                started = list(pool.map(start_one, range(RUN_COUNT)))

            def all_ended() -> bool:
                return all(status in TERMINAL for status, _ in database.runs().values())

            until(all_ended, f"{RUN_COUNT} runs to end", deadline_seconds=120)
            finished = [api.run(run_id) for _, run_id in started]
            transcripts = {run_id: api.messages(thread_id) for thread_id, run_id in started}
            attempts = database.attempts()
        finally:
            exits = [worker.stop() for worker in workers]
            database.close()
    assert exits == [0, 0], [worker.output() for worker in workers]

    run_ids = {run_id for _, run_id in started}
    assert len(run_ids) == RUN_COUNT
    assert [run["status"] for run in finished] == ["succeeded"] * RUN_COUNT, finished
    assert {run["step_count"] for run in finished} == {1}
    for index, (_, run_id) in enumerate(started):
        messages = transcripts[run_id]
        assert [m["role"] for m in messages] == ["user", "assistant"], messages
        assert messages[0]["content"] == f"Halo nomor {index}"
        assert {m["run_id"] for m in messages} == {run_id}
    assert attempts == dict.fromkeys(run_ids, 1)

    # Each worker's log names the runs it took: together every run, each once, and both
    # workers took some.
    taken = [TOOK_RUN.findall(worker.output()) for worker in workers]
    names = [{name for name, _, _ in lines} for lines in taken]
    assert all(len(found) == 1 for found in names), names
    assert names[0] != names[1]
    runs_taken = [[run_id for _, run_id, _ in lines] for lines in taken]
    assert all(runs_taken), [len(found) for found in runs_taken]
    assert sorted(runs_taken[0] + runs_taken[1]) == sorted(run_ids)
    assert {attempt for lines in taken for _, _, attempt in lines} == {"1"}
