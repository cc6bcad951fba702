"""Schemathesis against a live server: requests generated from the published description, with
0 server errors and 0 answers that break the description as the bar.

Two runs over every `/v1` operation: schema-valid requests under every response check, then
schema-violating ones checked for 5xx, status codes and content types. The counts of both go to
`openapi-contract.json` in the test's directory and to the test's output.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import ServerProcess, api_key, free_port, juru_command

pytestmark = pytest.mark.e2e

EXAMPLES_PER_OPERATION = 10
# Each run may take at most this long (schemathesis stops generating then).
RUN_SECONDS = 10
# The one check left out, and why: schema-valid requests may be refused for what no schema
# says (an unknown cursor or id, `to` before `from`, an unknown built-in tool, an empty file).
EXCLUDED = "positive_data_acceptance"
# Schema-violating requests must be refused; 413 is a refusal too: a body over the server's
# limit (JURU_MAX_BODY_BYTES) is refused before its schema is read, and a string just over its
# maxLength in characters of four UTF-8 bytes each can be (a system prompt of 100,001 of them
# is 400 KB of UTF-8 and 1.2 MB as JSON escapes).
CHECK_SETTINGS = """
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428",
                     "429", "5xx"]
"""
# The longest line of schemathesis's output kept in a failure's message (a reproduction's
# body can be megabytes long).
LINE_CHARS = 2_000


def seed_objects(base_url: str, headers: dict[str, str]) -> dict[str, str]:
    """An agent, a thread and a run waiting for tool outputs, so that path parameters name
    real objects (schemathesis sends these ids, besides the ones it generates)."""
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as client:
        tool = {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
            },
        }
        agent = client.post(
            "/v1/agents", json={"name": "w", "model_id": "juru/demo", "tools": [tool]}
        ).json()
        thread = client.post(f"/v1/agents/{agent['id']}/threads", json={}).json()
        run = client.post(f"/v1/threads/{thread['id']}/runs", json={"input": "weather in Oslo"})
        return {"agent_id": agent["id"], "thread_id": thread["id"], "run_id": run.json()["id"]}


def id_dictionaries(ids: dict[str, str]) -> str:
    """Schemathesis configuration: each path id is the seeded object's half of the time."""
    lines = [f'dictionaries.{name} = {{ values = ["{value}"] }}' for name, value in ids.items()]
    lines += [
        f'parameters."path.{name}" = {{ dictionary = "{name}", probability = 0.5 }}' for name in ids
    ]
    return "\n".join(lines) + "\n"


def schemathesis_run(
    base_url: str, key: str, mode: str, checks: list[str], report: Path, config: Path
) -> dict[str, Any]:
    command = [
        *[sys.executable, "-m", "schemathesis.cli", "--config-file", str(config), "run"],
        f"{base_url}/openapi.json",
        *["--header", f"Authorization: Bearer {key}"],
        *["--include-path-regex", "^/v1/", "--mode", mode, *checks],
        # The seeded run waits for tool outputs: its stream stays open until the run ends, by
        # design (tests/integration/test_run_streams.py covers the route).
        *["--exclude-path-regex", "/events$"],
        *["--phases", "examples,coverage,fuzzing", "--max-examples", str(EXAMPLES_PER_OPERATION)],
        *["--max-time", str(RUN_SECONDS), "--seed", "12", "--no-color"],
        *["--report", "json", "--report-json-path", str(report)],
    ]
    # In the test's directory, where schemathesis keeps its cache.
    done = subprocess.run(
        command,
        cwd=report.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert report.exists(), done.stdout + done.stderr
    result: dict[str, Any] = json.loads(report.read_text())
    lines = [line[:LINE_CHARS] for line in done.stdout.splitlines()]
    result["output"] = "\n".join(lines)[-20_000:]
    return result


def test_the_api_answers_as_its_description_says(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path}/juru.db"
    env: dict[str, str | None] = {
        "JURU_DATABASE_URL": database_url,
        # Thousands of requests a minute: the limiter would answer most of them 429.
        "JURU_TIER_RATE_LIMITS": json.dumps({"paid": "100000/minute"}),
    }
    server = ServerProcess([*juru_command(), "serve"], free_port(), env, tmp_path / "server.log")
    with server:
        key = api_key(database_url, balance="1000000")
        ids = seed_objects(server.base_url, {"Authorization": f"Bearer {key}"})
        config = tmp_path / "schemathesis.toml"
        config.write_text(id_dictionaries(ids) + CHECK_SETTINGS)
        runs = {
            "positive": schemathesis_run(
                server.base_url,
                key,
                "positive",
                ["--checks", "all", "--exclude-checks", EXCLUDED],
                tmp_path / "positive.json",
                config,
            ),
            "negative": schemathesis_run(
                server.base_url,
                key,
                "negative",
                ["--checks", "all", "--exclude-checks", EXCLUDED],
                tmp_path / "negative.json",
                config,
            ),
        }
    summary = {
        mode: {
            "operations": run["operations"]["tested"],
            "examples": run["test_cases"]["generated"],
            "failures": len(run["failures"]),
            "errors": len(run["errors"]),
        }
        for mode, run in runs.items()
    }
    (tmp_path / "openapi-contract.json").write_text(json.dumps(summary, indent=2))
    print(f"schemathesis: {json.dumps(summary)}")
    server_errors = re.findall(r'"[A-Z]+ [^"]*" 5\d\d [^\n]*', server.output())
    assert server_errors == [], server_errors[:20]
    for mode, run in runs.items():
        assert run["failures"] == [] and run["errors"] == [], f"{mode}:\n{run['output']}"
        assert run["operations"]["tested"] >= 25, run["operations"]
        assert run["test_cases"]["generated"] >= 24 * 5, run["test_cases"]
