"""A run's stream in a real browser: Chromium's own `EventSource`, opened with a stream token
(it cannot send an Authorization header), follows a run through its pause to the end, and
stops for good when the server answers its reconnect with 204."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser

from tests.e2e.test_hosted_runs import Api, juru_serve
from tests.support.hosted import WEATHER_TOOL, demo_answer
from tests.support.server import api_key

pytestmark = pytest.mark.e2e
LISTEN = """(url) => {
  window.seen = [];
  const events = new EventSource(url);
  window.events = events;
  for (const type of ["run.status", "message.completed", "step.completed", "message.delta"]) {
    events.addEventListener(type, (event) => {
      window.seen.push({type, lastEventId: event.lastEventId, data: JSON.parse(event.data)});
    });
  }
}"""
SEEN_STATUS = "(status) => window.seen.some((e) => e.data.status === status)"


def test_event_source_follows_a_run_with_a_stream_token(browser: Browser, tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path}/juru.db"
    with (
        juru_serve(database_url, tmp_path / "serve.log") as server,
        Api(server.base_url, api_key(database_url)) as api,
    ):
        agent = api.create_agent(model_id="juru/demo", tools=[WEATHER_TOOL])
        thread = api.create_thread(agent["id"])
        run = api.create_run(thread["id"], "What is the weather in Jakarta?")
        ticket = api.http.post(f"/v1/runs/{run['id']}/stream_token")
        assert ticket.status_code == 201, ticket.text

        page = browser.new_page()
        page.goto(f"{server.base_url}/health")  # the stream is read from the server's origin
        page.evaluate(LISTEN, ticket.json()["url"])
        page.wait_for_function(SEEN_STATUS, arg="requires_action", timeout=60_000)
        paused = api.run(run["id"])
        outputs = [
            {"tool_call_id": call["id"], "output": "sunny, 31 C"}
            for call in paused["pending_tool_calls"]
        ]
        answered = api.http.post(f"/v1/runs/{run['id']}/tool_outputs", json={"outputs": outputs})
        assert answered.status_code == 200, answered.text
        page.wait_for_function(SEEN_STATUS, arg="succeeded", timeout=60_000)
        # The server closes the stream after the terminal event; the browser reconnects with
        # its Last-Event-ID, gets 204 and stops for good (readyState CLOSED).
        page.wait_for_function("() => window.events.readyState === 2", timeout=30_000)
        seen: list[dict[str, Any]] = page.evaluate("() => window.seen")
        page.close()
    durable = [e for e in seen if e["type"] != "message.delta"]
    assert [int(e["lastEventId"]) for e in durable] == list(range(1, len(durable) + 1))
    assert durable[-1]["data"]["status"] == "succeeded"
    answer = demo_answer("get_weather", "sunny, 31 C")
    assert durable[-1]["data"]["output"] == answer
    deltas = [e for e in seen if e["type"] == "message.delta"]
    assert "".join(d["data"]["delta"] for d in deltas) == answer
    # A delta has no id of its own: the browser keeps the last durable one for its reconnect.
    for delta in deltas:
        before = seen[: seen.index(delta)]
        last_durable = [e for e in before if e["type"] != "message.delta"][-1]
        assert delta["lastEventId"] == last_durable["lastEventId"]
    reconnects = [line for line in server.output().splitlines() if "/events?token=" in line]
    assert any(" 204" in line for line in reconnects), reconnects
