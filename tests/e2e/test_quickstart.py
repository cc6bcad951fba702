"""The README's commands against real server processes."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import REPO, ServerProcess, free_port, juru_command

pytestmark = pytest.mark.e2e
README = (REPO / "README.md").read_text()


def bash_block_after(marker: str) -> str:
    """The first ```bash block that follows `marker` in the README."""
    tail = README[README.index(marker) :]
    match = re.search(r"```bash\n(.*?)```", tail, re.DOTALL)
    assert match, f"no bash block after {marker!r}"
    return match.group(1)


def json_documents(text: str) -> list[Any]:
    decoder = json.JSONDecoder()
    documents, position = [], 0
    while position < len(text):
        if text[position].isspace():
            position += 1
            continue
        document, position = decoder.raw_decode(text, position)
        documents.append(document)
    return documents


def run_block(block: str, port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.replace("127.0.0.1:8000", f"127.0.0.1:{port}")],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_readme_quickstart_serves_the_walkthrough(tmp_path: Path) -> None:
    first_command = bash_block_after("**First command**").strip()
    assert first_command == "./scripts/quickstart"
    port = free_port()
    database = f"sqlite:///{tmp_path}/juru.db"
    env = {"JURU_DATABASE_URL": database, "PLAYGROUND_ENABLED": None, "JURU_RUNTIME_ENABLED": None}
    with ServerProcess(["bash", "-c", first_command], port, env, tmp_path / "server.log"):
        done, runtime = (
            run_block(bash_block_after(marker), port)
            for marker in ("### Try it", "### Agent Runtime contract")
        )
    assert done.returncode == 0, done.stderr
    assert runtime.returncode == 0, runtime.stderr
    query, *streamed, introduced, remembered = json_documents(runtime.stdout)
    assert "Jakarta" in query["output"]
    assert len(streamed) > 2 and "Tokyo" in "".join(chunk["output"] for chunk in streamed)
    assert introduced["output"] and "Ana" in remembered["output"]
    health, features, react, resumed, chat = json_documents(done.stdout)
    assert health["status"] == "ok" and health["database"] == "sqlite"
    assert [feature["name"] for feature in features] == ["ReAct", "Human-in-the-loop", "Subagents"]
    assert "San Francisco" in react["answer"]
    assert resumed["error"] is None and "ana@example.com" in resumed["answer"]
    assert "Jakarta" in chat["answer"]
    assert (tmp_path / "juru.db").exists()


def split_sse(output: str) -> tuple[str, list[Any]]:
    """The output without its server-sent events, and the events' JSON payloads."""
    events = re.findall(r"data: (.*)$", output, re.MULTILINE)
    rest = re.sub(r"data: .*$", "", output, flags=re.MULTILINE)
    return rest, [json.loads(event) for event in events if event != "[DONE]"] + (
        ["[DONE]"] if "data: [DONE]" in output else []
    )


def test_the_readme_v1_walkthrough_works_with_the_local_key(tmp_path: Path) -> None:
    port = free_port()
    env = {"JURU_DATABASE_URL": f"sqlite:///{tmp_path}/juru.db"}
    with ServerProcess([*juru_command(), "serve"], port, env, tmp_path / "server.log") as server:
        walkthrough = (
            bash_block_after("### Call `/v1`")
            .replace("127.0.0.1:8000", f"127.0.0.1:{port}")
            .replace(".juru/local-api-key", str(tmp_path / "local-api-key"))
        )
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", walkthrough],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert "local-api-key" in server.output()
    assert done.returncode == 0, done.stderr
    rest, events = split_sse(done.stdout)
    models, completion, usage, account = json_documents(rest)
    assert "juru/demo" in {model["id"] for model in models["data"]}
    assert completion["choices"][0]["message"]["content"]
    assert events[-1] == "[DONE]" and events[0]["object"] == "chat.completion.chunk"
    streamed = "".join(e["choices"][0]["delta"].get("content") or "" for e in events[:-1])
    assert streamed
    assert {line["source"] for line in usage["data"]} == {"chat"}
    assert sum(line["calls"] for line in usage["data"]) == 2
    # The demo model is free: the local account's opening balance is whole, nothing held.
    assert (account["name"], account["held_rupiah"]) == ("local", 0)
    assert account["available_rupiah"] == account["balance_rupiah"] > 0


def test_a_paused_review_survives_kill_9_of_the_server(database_url: str, tmp_path: Path) -> None:
    env: dict[str, str | None] = {"JURU_DATABASE_URL": database_url, "PLAYGROUND_ENABLED": "true"}
    port = free_port()
    first = ServerProcess([*juru_command(), "serve"], port, env, tmp_path / "first.log").start()
    try:
        turn = httpx.post(
            f"{first.base_url}/playground/messages",
            json={"feature": "Human-in-the-loop", "message": "Email ana@example.com about lunch"},
            timeout=30,
        ).json()
        assert turn["pending_review"]["action_requests"][0]["name"] == "send_email"
    finally:
        first.kill()
    with ServerProcess([*juru_command(), "serve"], port, env, tmp_path / "second.log") as second:
        resumed = httpx.post(
            f"{second.base_url}/playground/resume",
            json={
                "feature": "Human-in-the-loop",
                "thread_id": turn["thread_id"],
                "value": {"decisions": [{"type": "approve"}]},
            },
            timeout=30,
        )
    assert resumed.status_code == 200
    assert "ana@example.com" in resumed.json()["answer"]
