"""The Agent Runtime contract on a real `juru serve` process, with the fake OpenAI server as
its model: the document's example requests, streaming as the model writes, failures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import openai_env
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.server import ServerProcess, free_port, juru_command

pytestmark = pytest.mark.e2e
TIMEOUT = httpx.Timeout(60.0)


@pytest.fixture(scope="module")
def server(
    fake_openai_server: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("runtime")
    env: dict[str, str | None] = {
        "JURU_DATABASE_URL": f"sqlite:///{folder}/juru.db",
        "JURU_RUNTIME_ENABLED": "true",
        "JURU_DEFAULT_MODEL": "openai/gpt-4o-mini",
        "PLAYGROUND_ENABLED": None,
        **openai_env(fake_openai_server),
    }
    command = [*juru_command(), "serve"]
    with ServerProcess(command, free_port(), env, folder / "server.log") as process:
        yield process


def post(server: ServerProcess, path: str, method: str, **arguments: Any) -> httpx.Response:
    body = {"class_method": method, "input": arguments}
    return httpx.post(f"{server.base_url}{path}", json=body, timeout=TIMEOUT)


def stream_lines(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.headers["content-type"] == "application/json"
    return [json.loads(line) for line in response.text.splitlines()]


def test_the_documents_example_requests(
    server: ServerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([{"content": "The capital of France is Paris."}])
    unary = post(server, "/api/reasoning_engine", "query", message="What is the capital of France?")
    assert unary.status_code == 200
    assert unary.json() == {"output": "The capital of France is Paris."}
    assert fake_openai.requests()[0]["messages"][-1]["content"] == "What is the capital of France?"

    story = "Once upon a time, a small agent answered every question."
    fake_openai.script([{"content": story}])
    streamed = post(
        server, "/api/stream_reasoning_engine", "stream_query", message="Tell me a short story."
    )
    assert streamed.status_code == 200
    chunks = stream_lines(streamed)
    assert len(chunks) > 3 and all(set(chunk) == {"output"} for chunk in chunks)
    assert "".join(chunk["output"] for chunk in chunks) == story


def test_the_first_line_arrives_while_the_model_is_still_writing(
    server: ServerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([{"content": "Once upon a time there was a river.", "hold": "story"}])
    body = {"class_method": "stream_query", "input": {"message": "Tell me a short story."}}
    url = f"{server.base_url}/api/stream_reasoning_engine"
    with httpx.stream("POST", url, json=body, timeout=TIMEOUT) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        first = json.loads(next(lines))
        # The fake model has sent one word and waits at its gate: it has not finished.
        assert fake_openai.is_held("story")
        assert first == {"output": "Once "}
        fake_openai.open_gate("story")
        rest = [json.loads(line) for line in lines if line]
    assert "".join(chunk["output"] for chunk in [first, *rest]) == (
        "Once upon a time there was a river."
    )


def test_a_model_failure_after_the_stream_started_is_the_last_line(
    server: ServerProcess, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {
                "content": "Let me look.",
                "tool_calls": [{"name": "get_weather", "arguments": {"location": "Jakarta"}}],
            },
            {"error": {"status": 500, "message": "the model fell over"}, "repeat": True},
        ]
    )
    response = post(server, "/api/stream_reasoning_engine", "stream_query", message="Weather?")
    assert response.status_code == 200
    chunks = stream_lines(response)
    assert chunks[0] == {"output": "Let "}
    assert set(chunks[-1]) == {"error"} and "the model fell over" in chunks[-1]["error"]

    fake_openai.script([{"error": {"status": 500, "message": "down"}, "repeat": True}])
    before = post(server, "/api/stream_reasoning_engine", "stream_query", message="Hi")
    assert before.status_code == 500 and "down" in before.json()["error"]


def test_a_client_that_leaves_mid_stream_frees_its_session(
    server: ServerProcess, fake_openai: FakeOpenAIServer
) -> None:
    created = post(server, "/api/reasoning_engine", "create_session", user_id="ana").json()
    session = created["output"]["id"]
    fake_openai.script([{"content": "A long story that nobody reads.", "hold": "left"}])
    body = {
        "class_method": "stream_query",
        "input": {"message": "Tell me a story.", "user_id": "ana", "session_id": session},
    }
    url = f"{server.base_url}/api/stream_reasoning_engine"
    with httpx.stream("POST", url, json=body, timeout=TIMEOUT) as response:
        assert json.loads(next(response.iter_lines())) == {"output": "A "}
    # The gate stays closed: had the abandoned turn kept running, it would still hold the
    # session's lock and this query would time out.
    fake_openai.script([{"content": "Still here."}])
    try:
        again = post(
            server,
            "/api/reasoning_engine",
            "query",
            message="Hello?",
            user_id="ana",
            session_id=session,
        )
    finally:
        fake_openai.open_gate("left")
    assert again.status_code == 200 and again.json() == {"output": "Still here."}


def test_the_server_answers_404_with_the_runtime_off(tmp_path: Path) -> None:
    env: dict[str, str | None] = {
        "JURU_DATABASE_URL": f"sqlite:///{tmp_path}/juru.db",
        "JURU_RUNTIME_ENABLED": None,
    }
    with ServerProcess([*juru_command(), "serve"], free_port(), env, tmp_path / "log") as off:
        for path in ("/api/reasoning_engine", "/api/stream_reasoning_engine"):
            assert post(off, path, "query", message="hi").status_code == 404
