"""Built-in features on a real LangChain OpenAI client, talking to the fake server over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from httpx import AsyncClient

from juru.app import create_app
from juru.settings import Settings
from tests.conftest import openai_env, start_client
from tests.integration.test_playground_api import nodes, say
from tests.support.fake_openai import FakeOpenAIServer


@pytest.fixture
async def openai_client(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer
) -> AsyncIterator[AsyncClient]:
    settings = settings_factory(
        default_model="openai/gpt-4o-mini", provider_env=openai_env(fake_openai)
    )
    async for client in start_client(create_app(settings)):
        yield client


def roles(request: dict[str, Any]) -> list[str]:
    return [message["role"] for message in request["messages"]]


async def test_react_calls_the_tool_then_answers(
    openai_client: AsyncClient, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {"tool_calls": [{"name": "get_weather", "arguments": {"location": "Jakarta"}}]},
            {"content": "Jakarta is warm today."},
        ]
    )
    turn = (await say(openai_client, "ReAct", "Cuaca di Jakarta?")).json()
    assert turn["error"] is None
    assert nodes(turn) == [(0, "llm_call"), (0, "tool_node"), (0, "llm_call")]
    assert turn["steps"][0]["events"][0]["args"] == {"location": "Jakarta"}
    assert turn["answer"] == "Jakarta is warm today."
    first, second = fake_openai.requests()
    assert first["model"] == "gpt-4o-mini"
    assert [tool["function"]["name"] for tool in first["tools"]] == ["get_weather"]
    assert roles(first) == ["system", "user"]
    assert roles(second) == ["system", "user", "assistant", "tool"]
    assert "Jakarta" in second["messages"][-1]["content"]


async def test_the_second_message_carries_the_first(
    openai_client: AsyncClient, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([{"content": "Nice to meet you."}, {"content": "You are Ana."}])
    first = (await say(openai_client, "ReAct", "I am Ana")).json()
    await say(openai_client, "ReAct", "Who am I?", thread_id=first["thread_id"])
    contents = [message["content"] for message in fake_openai.requests()[1]["messages"]]
    assert contents[1:] == ["I am Ana", "Nice to meet you.", "Who am I?"]


async def test_review_on_a_real_model(
    openai_client: AsyncClient, fake_openai: FakeOpenAIServer
) -> None:
    email = {"to": "ana@example.com", "subject": "Hi", "body": "Hello"}
    fake_openai.script(
        [{"tool_calls": [{"name": "send_email", "arguments": email}]}, {"content": "Sent."}]
    )
    turn = (await say(openai_client, "Human-in-the-loop", "mail Ana")).json()
    assert turn["pending_review"]["action_requests"][0]["args"] == email
    resumed = await openai_client.post(
        "/playground/resume",
        json={
            "feature": "Human-in-the-loop",
            "thread_id": turn["thread_id"],
            "value": {"decisions": [{"type": "reject", "message": "not now"}]},
        },
    )
    assert resumed.json()["answer"] == "Sent."
    tool_message = fake_openai.requests()[-1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "not now"


async def test_subagents_on_a_real_model(
    openai_client: AsyncClient, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {"tool_calls": [{"name": "ask_weather_agent", "arguments": {"request": "Oslo?"}}]},
            {"tool_calls": [{"name": "get_weather", "arguments": {"location": "Oslo"}}]},
            {"content": "Oslo: see report."},
            {"content": "The weather agent says Oslo is fine."},
        ]
    )
    turn = (await say(openai_client, "Subagents", "Weather in Oslo?")).json()
    assert [depth for depth, _ in nodes(turn)] == [0, 1, 1, 1, 0, 0]
    assert turn["answer"] == "The weather agent says Oslo is fine."
    subagent_request = fake_openai.requests()[1]
    assert roles(subagent_request) == ["system", "user"]
    assert subagent_request["messages"][1]["content"] == "Oslo?"


async def test_a_model_failure_is_reported_in_the_turn(
    openai_client: AsyncClient, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([{"error": {"status": 400, "message": "context too long"}}])
    response = await say(openai_client, "ReAct", "hi")
    assert response.status_code == 200
    turn = response.json()
    assert turn["error"]["type"].endswith("Error")
    assert "context too long" in turn["error"]["message"]
    assert turn["answer"] is None and turn["steps"] == []


async def test_a_failed_tool_turn_leaves_a_history_the_provider_accepts(
    openai_client: AsyncClient, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {"tool_calls": [{"name": "get_weather", "arguments": {"location": "Rome"}}]},
            {"content": "ok"},
        ]
    )
    failed = (await say(openai_client, "ReAct", "Rome?", max_steps=1)).json()
    assert failed["error"]["type"] == "GraphRecursionError"
    again = (await say(openai_client, "ReAct", "hello", thread_id=failed["thread_id"])).json()
    assert again["error"] is None and again["answer"] == "ok"
    history = fake_openai.requests()[-1]["messages"]
    assert roles({"messages": history}) == ["system", "user", "assistant", "tool", "user"]
    assert history[3]["content"].startswith("This tool call was never answered")
