"""A client of Juru's Hosted Agents API whose agent calls a tool this program runs.

Run a server (`./scripts/quickstart`), then:

    .venv/bin/python examples/weather_client.py "What is the weather in Jakarta?"

It creates an agent with a `get_weather` tool, a thread, and a run. `run_until_done` follows
the run's event stream; whenever the run stops in `requires_action`, it calls `get_weather`
below with the arguments the model chose and sends the result back, until the run ends.
The server and key come from `JURU_BASE_URL` (default http://127.0.0.1:8000) and
`JURU_API_KEY`, else the key a fresh local install wrote to `.juru/local-api-key`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from juru.client import Juru, JuruError

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
    print(f"executed get_weather(city={city!r})")
    return {"city": city, "temp_c": 31, "condition": "sunny"}


def api_key() -> str | None:
    local = Path(".juru") / "local-api-key"
    if "JURU_API_KEY" not in os.environ and local.exists():
        return local.read_text().strip()
    return None  # the client reads JURU_API_KEY


def main(question: str) -> int:
    with Juru(api_key=api_key()) as juru:
        agent = juru.agents.create(
            "Weather assistant",
            MODEL,
            system_prompt="Use get_weather for current weather.",
            tools=[WEATHER_TOOL],
            max_steps=10,
        )
        thread = juru.threads.create(agent.id)
        run = juru.runs.run_until_done(thread.id, question, tools={"get_weather": get_weather})
    print(f"status: {run.status}, steps: {run.step_count}, cost: Rp{run.cost_rupiah}")
    print(run.output or run.error)
    return 0 if run.status == "succeeded" else 1


if __name__ == "__main__":
    try:
        raise SystemExit(main(" ".join(sys.argv[1:]) or "What is the weather in Jakarta?"))
    except JuruError as error:
        raise SystemExit(f"error: {error}") from None
