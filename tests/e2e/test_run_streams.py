"""Run streams over real HTTP between real processes: a client that drops its connection at
every point and reconnects with the last id it saw receives every durable event exactly once,
in order, ending with the terminal one; also when it reconnects to another `juru serve` than
the one executing the run (PostgreSQL), and when the server is killed and restarted mid-run."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse

from tests.e2e.test_hosted_runs import (
    FAKE_MODEL,
    RUN_DEADLINE_SECONDS,
    Api,
    FakeOpenAIProcess,
    juru_serve,
    until,
)
from tests.support.server import ServerProcess, api_key, free_port

pytestmark = pytest.mark.e2e
TERMINAL = {"succeeded", "failed", "expired", "cancelled"}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
# Two pauses for the client's tool, then the answer: 3 model steps.
SCRIPT = [
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Jakarta"}}]},
    {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Bandung"}}]},
    {"content": "Jakarta 31 C, Bandung 24 C."},
]
EXPECTED_KINDS = [
    "run.status:queued",
    "run.status:running",
    "message.completed",
    "message.completed",
    "step.completed",
    "run.status:requires_action",
    "run.status:running",
    "message.completed",
    "message.completed",
    "step.completed",
    "run.status:requires_action",
    "run.status:running",
    "message.completed",
    "message.completed",
    "step.completed",
    "run.status:succeeded",
]


def kind(event: dict[str, Any]) -> str:
    data = event["data"]
    return f"run.status:{data['status']}" if event["event"] == "run.status" else event["event"]


class Follower:
    """Reads a run's stream and drops the connection after `drops[i]` events of its i-th
    connection, reconnecting (to the next of `base_urls`) with Last-Event-ID."""

    def __init__(self, base_urls: list[str], key: str, run_id: str, drops: Iterator[int]) -> None:
        self.base_urls = base_urls
        self.headers = {"Authorization": f"Bearer {key}"}
        self.run_id = run_id
        self.drops = drops
        self.events: list[dict[str, Any]] = []
        self.connections = 0
        self.deltas = 0

    @property
    def last_id(self) -> int:
        return self.events[-1]["id"] if self.events else 0

    def follow(self, on_event: Callable[[dict[str, Any]], None]) -> list[dict[str, Any]]:
        deadline = time.monotonic() + RUN_DEADLINE_SECONDS
        with httpx.Client(timeout=httpx.Timeout(60, connect=5)) as client:
            while time.monotonic() < deadline:
                base = self.base_urls[self.connections % len(self.base_urls)]
                self.connections += 1
                if self._connection(client, base, next(self.drops), on_event):
                    return self.events
        pytest.fail(f"the stream did not end in time; seen {[kind(e) for e in self.events]}")

    def _connection(
        self,
        client: httpx.Client,
        base: str,
        drop_after: int,
        on_event: Callable[[dict[str, Any]], None],
    ) -> bool:
        """One connection: True once the terminal event came."""
        headers = {**self.headers, "Last-Event-ID": str(self.last_id)}
        url = f"{base}/v1/runs/{self.run_id}/events"
        received = 0
        try:
            with connect_sse(client, "GET", url, headers=headers) as source:
                assert source.response.status_code == 200, source.response.read()
                for sse in source.iter_sse():
                    if sse.event == "message.delta":
                        # Ephemeral; it has no id of its own (the parser's `id` is still the
                        # last durable one, as the SSE rules keep it for a reconnect).
                        self.deltas += 1
                        continue
                    event = {"id": int(sse.id), "event": sse.event, "data": sse.json()}
                    self.events.append(event)
                    on_event(event)
                    if event["event"] == "run.status" and event["data"]["status"] in TERMINAL:
                        return True
                    received += 1
                    if received >= drop_after:
                        return False  # the client drops the connection here
        except httpx.TransportError:
            time.sleep(0.1)  # the server is down (restarting): retry against a deadline
        return False


def answering(api_for: Callable[[], Api]) -> Callable[[dict[str, Any]], None]:
    """Answers every pause the stream shows, as a client of the API would."""

    def on_event(event: dict[str, Any]) -> None:
        if event["event"] == "run.status" and event["data"]["status"] == "requires_action":
            outputs = [
                {"tool_call_id": call["id"], "output": '{"temp_c": 30}'}
                for call in event["data"]["pending_tool_calls"]
            ]
            response = api_for().http.post(
                f"/v1/runs/{event['data']['id']}/tool_outputs", json={"outputs": outputs}
            )
            assert response.status_code == 200, response.text

    return on_event


def assert_exactly_once_in_order(events: list[dict[str, Any]]) -> None:
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    assert [kind(e) for e in events] == EXPECTED_KINDS
    assert events[-1]["data"]["output"] == "Jakarta 31 C, Bandung 24 C."


def cycle_drops() -> Iterator[int]:
    """Drop after 1 event, then 2, then 3, ...: every position of the log is a cut."""
    count = 0
    while True:
        count += 1
        yield count


def test_a_client_dropping_its_connection_anywhere_misses_nothing(
    database_url: str, tmp_path: Path, fake_openai_process: FakeOpenAIProcess
) -> None:
    fake = fake_openai_process
    fake.script([{**reply, "delay": 0.2} for reply in SCRIPT])
    with (
        juru_serve(database_url, tmp_path / "serve.log", **fake.env()) as server,
        Api(server.base_url, api_key(database_url)) as api,
    ):
        agent = api.create_agent(model_id=FAKE_MODEL, tools=[WEATHER_TOOL], max_steps=5)
        thread = api.create_thread(agent["id"])
        run = api.create_run(thread["id"], "Cuaca Jakarta dan Bandung?")
        follower = Follower([server.base_url], api_key_of(api), run["id"], cycle_drops())
        events = follower.follow(answering(lambda: api))
        assert_exactly_once_in_order(events)
        assert follower.connections >= 5
        # The finished run's stream replays whole and closes at once.
        replay = Follower([server.base_url], api_key_of(api), run["id"], iter([100]))
        assert replay.follow(lambda _: None) == events


def test_a_restarted_server_streams_on_from_the_last_id(
    database_url: str, tmp_path: Path, fake_openai_process: FakeOpenAIProcess
) -> None:
    fake = fake_openai_process
    fake.script([SCRIPT[0], {**SCRIPT[1], "delay": 60}])
    port = free_port()
    env = {**fake.env(), "JURU_LEASE_SECONDS": "600"}
    first = juru_serve(database_url, tmp_path / "first.log", port, **env).start()
    key = api_key(database_url)
    servers: list[ServerProcess] = [first]
    try:
        with Api(first.base_url, key) as api:
            agent = api.create_agent(model_id=FAKE_MODEL, tools=[WEATHER_TOOL], max_steps=5)
            thread = api.create_thread(agent["id"])
            run = api.create_run(thread["id"], "Cuaca Jakarta dan Bandung?")

            def restart_in_the_second_model_call(event: dict[str, Any]) -> None:
                answering(lambda: api)(event)
                if kind(event) == "run.status:running" and event["id"] > 2 and len(servers) == 1:
                    until(lambda: len(fake.requests()) >= 2, "the second model call")
                    servers[-1].kill()  # mid-call, mid-stream
                    fake.script(SCRIPT[1:])
                    servers.append(juru_serve(database_url, tmp_path / "second.log", port, **env))
                    servers[-1].start()

            follower = Follower([first.base_url], key, run["id"], iter(lambda: 1000, None))
            events = follower.follow(restart_in_the_second_model_call)
        assert_exactly_once_in_order(events)
        assert len(servers) == 2 and follower.connections >= 2
    finally:
        for server in servers:
            server.stop()


@pytest.mark.postgresql
def test_a_stream_served_by_another_process_than_the_runs_misses_nothing(
    fresh_postgres_url: str, tmp_path: Path, fake_openai_process: FakeOpenAIProcess
) -> None:
    # Two `juru serve` share one database on PostgreSQL only.
    database_url = fresh_postgres_url
    fake = fake_openai_process
    fake.script([{**reply, "delay": 0.2} for reply in SCRIPT])
    executing = juru_serve(
        database_url, tmp_path / "a.log", **fake.env(), JURU_INSTANCE_NAME="serve-a"
    )
    # The second one runs no workers: every run is executed by the first.
    streaming = juru_serve(
        database_url, tmp_path / "b.log", JURU_INSTANCE_NAME="serve-b", JURU_WORKERS="0"
    )
    with executing, streaming, Api(executing.base_url, api_key(database_url)) as api:
        agent = api.create_agent(model_id=FAKE_MODEL, tools=[WEATHER_TOOL], max_steps=5)
        thread = api.create_thread(agent["id"])
        run = api.create_run(thread["id"], "Cuaca Jakarta dan Bandung?")
        bases = [streaming.base_url, executing.base_url]
        follower = Follower(bases, api_key_of(api), run["id"], cycle_drops())
        events = follower.follow(answering(lambda: api))
        assert_exactly_once_in_order(events)
        assert follower.connections >= 5


def api_key_of(api: Api) -> str:
    return str(api.http.headers["Authorization"]).removeprefix("Bearer ")
