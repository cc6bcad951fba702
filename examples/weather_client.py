"""A client of Juru's Hosted Agents API that executes a client tool in a loop.

Run a server (`./scripts/quickstart`), then:

    .venv/bin/python examples/weather_client.py "What is the weather in Jakarta?"

It creates an agent with a `get_weather` tool, a thread, and a run; whenever the run stops in
`requires_action`, it executes the requested calls itself and submits the outputs, until the run
ends. Waiting uses `GET /v1/runs/:id?wait=30`, which answers as soon as the run needs the
tool outputs or has ended.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx

BASE_URL = os.environ.get("JURU_URL", "http://127.0.0.1:8000")
MODEL = os.environ.get("JURU_MODEL", "juru/demo")
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def get_weather(city: str) -> dict[str, Any]:
    """The client's own implementation of the tool (a real client would call a weather API)."""
    return {"city": city, "temp_c": 31, "condition": "sunny"}


TOOLS = {"get_weather": get_weather}


def check(response: httpx.Response) -> dict[str, Any]:
    if response.is_error:
        sys.exit(f"{response.status_code}: {response.text}")
    body: dict[str, Any] = response.json()
    return body


def execute(call: dict[str, str]) -> str:
    """Run one pending tool call; the output goes back as a string."""
    arguments = json.loads(call["arguments"])
    return json.dumps(TOOLS[call["name"]](**arguments))


def api_key() -> str:
    """JURU_API_KEY, else the key a fresh local install wrote to .juru/local-api-key."""
    if key := os.environ.get("JURU_API_KEY"):
        return key
    local = Path(".juru") / "local-api-key"
    if local.exists():
        return local.read_text().strip()
    sys.exit("set JURU_API_KEY (juru keys create --account NAME prints one)")


def main(question: str) -> int:
    headers = {"Authorization": f"Bearer {api_key()}"}
    with httpx.Client(base_url=BASE_URL, headers=headers, timeout=60) as client:
        agent = check(
            client.post(
                "/v1/agents",
                json={
                    "name": "Weather assistant",
                    "model_id": MODEL,
                    "system_prompt": "Use get_weather for current weather.",
                    "tools": [WEATHER_TOOL],
                    "max_steps": 10,
                },
            )
        )
        thread = check(client.post(f"/v1/agents/{agent['id']}/threads", json={}))
        run = check(client.post(f"/v1/threads/{thread['id']}/runs", json={"input": question}))
        while run["status"] not in ("succeeded", "failed", "expired", "cancelled"):
            if run["status"] == "requires_action":
                outputs = [
                    {"tool_call_id": call["id"], "output": execute(call)}
                    for call in run["pending_tool_calls"]
                ]
                print(f"executed {[call['name'] for call in run['pending_tool_calls']]}")
                run = check(
                    client.post(f"/v1/runs/{run['id']}/tool_outputs", json={"outputs": outputs})
                )
            else:
                run = check(client.get(f"/v1/runs/{run['id']}", params={"wait": 30}))
        print(f"status: {run['status']}, steps: {run['step_count']}")
        print(run.get("output") or run.get("error"))
        return 0 if run["status"] == "succeeded" else 1


if __name__ == "__main__":
    raise SystemExit(main(" ".join(sys.argv[1:]) or "What is the weather in Jakarta?"))
