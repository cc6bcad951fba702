"""The playground API over a real database: turn shape, status codes, subagents, memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from httpx import AsyncClient, Response

from juru.app import create_app
from juru.settings import Settings
from tests.conftest import start_client

CUSTOM = "tests.support.custom_features"


async def say(client: AsyncClient, feature: str, message: str, **extra: Any) -> Response:
    return await client.post(
        "/playground/messages", json={"feature": feature, "message": message, **extra}
    )


def nodes(turn: dict[str, Any]) -> list[tuple[int, str]]:
    return [(step["depth"], step["node"]) for step in turn["steps"]]


async def test_features_are_listed_in_order(client: AsyncClient) -> None:
    response = await client.get("/playground/features")
    assert response.status_code == 200
    features = response.json()
    assert [f["name"] for f in features] == ["ReAct", "Human-in-the-loop", "Subagents"]
    assert all(f["examples"] and "demo" in f["description"] for f in features)


async def test_react_turn_has_the_documented_shape(client: AsyncClient) -> None:
    response = await say(client, "ReAct", "What is the weather in sf?")
    assert response.status_code == 200
    turn = response.json()
    assert set(turn) == {"thread_id", "answer", "pending_review", "error", "seconds", "steps"}
    assert turn["thread_id"].startswith("playground-")
    assert nodes(turn) == [(0, "llm_call"), (0, "tool_node"), (0, "llm_call")]
    call, result, text = (step["events"] for step in turn["steps"])
    assert call == [
        {
            "type": "tool_call",
            "name": "get_weather",
            "args": {"location": "sf"},
            "content": None,
            "failed": False,
        }
    ]
    assert result[0]["type"] == "tool_result" and "San Francisco" in result[0]["content"]
    assert result[0]["failed"] is False and result[0]["args"] is None
    assert text == [
        {"type": "text", "name": None, "args": None, "content": turn["answer"], "failed": False}
    ]
    assert "San Francisco" in turn["answer"]
    assert turn["pending_review"] is None and turn["error"] is None
    assert isinstance(turn["seconds"], float) and turn["seconds"] >= 0


async def test_a_thread_remembers_its_first_message(client: AsyncClient) -> None:
    first = (await say(client, "ReAct", "Hello, my name is Ana.")).json()
    second = await say(client, "ReAct", "What is my name?", thread_id=first["thread_id"])
    assert "Your name is Ana." in second.json()["answer"]
    fresh = await say(client, "ReAct", "What is my name?")
    assert "Ana" not in fresh.json()["answer"]


async def test_a_given_thread_id_is_kept(client: AsyncClient) -> None:
    turn = (await say(client, "ReAct", "hi", thread_id="my-own-thread")).json()
    assert turn["thread_id"] == "my-own-thread"
    empty = (await say(client, "ReAct", "hi", thread_id="")).json()
    assert empty["thread_id"].startswith("playground-")


async def test_an_agent_failure_is_a_200_with_the_error_and_steps_so_far(
    client: AsyncClient,
) -> None:
    response = await say(client, "ReAct", "What is the weather in sf?", max_steps=1)
    assert response.status_code == 200
    turn = response.json()
    assert turn["error"]["type"] == "GraphRecursionError"
    assert "limit" in turn["error"]["message"].lower()
    assert turn["answer"] is None and turn["pending_review"] is None
    assert nodes(turn) == [(0, "llm_call")]


async def test_the_thread_works_again_after_a_failed_turn(client: AsyncClient) -> None:
    failed = (await say(client, "ReAct", "What is the weather in sf?", max_steps=1)).json()
    again = await say(
        client, "ReAct", "What is the weather in Oslo?", thread_id=failed["thread_id"]
    )
    assert again.json()["error"] is None
    assert "Oslo" in again.json()["answer"]


async def test_subagent_steps_are_at_depth_one_between_supervisor_steps(
    client: AsyncClient,
) -> None:
    turn = (await say(client, "Subagents", "What is the weather in Tokyo?")).json()
    assert nodes(turn) == [
        (0, "llm_call"),
        (1, "llm_call"),
        (1, "tool_node"),
        (1, "llm_call"),
        (0, "tool_node"),
        (0, "llm_call"),
    ]
    assert turn["steps"][0]["events"][0]["name"] == "ask_weather_agent"
    assert turn["steps"][1]["events"][0]["name"] == "get_weather"
    assert "Tokyo" in turn["answer"]


@pytest.mark.parametrize("field", ["feature", "message"])
async def test_missing_fields_are_422(client: AsyncClient, field: str) -> None:
    body = {"feature": "ReAct", "message": "hi"}
    del body[field]
    response = await client.post("/playground/messages", json=body)
    assert response.status_code == 422
    assert any(error["loc"][-1] == field for error in response.json()["detail"])


@pytest.mark.parametrize(
    "body",
    [
        {"feature": "ReAct", "message": ""},
        {"feature": "ReAct", "message": "hi", "max_steps": 0},
        {"feature": "ReAct", "message": "hi", "max_steps": 201},
        {"feature": "ReAct", "message": "hi", "max_steps": "many"},
        {"feature": "ReAct", "message": 7},
        {"feature": "ReAct", "message": "hi", "unknown_field": True},
    ],
)
async def test_bodies_off_the_table_are_422(client: AsyncClient, body: dict[str, Any]) -> None:
    response = await client.post("/playground/messages", json=body)
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)


async def test_resume_without_value_or_thread_is_422(client: AsyncClient) -> None:
    for body in ({"feature": "ReAct", "thread_id": "x"}, {"feature": "ReAct", "value": 1}):
        response = await client.post("/playground/resume", json=body)
        assert response.status_code == 422


async def test_max_steps_bounds_are_accepted(client: AsyncClient) -> None:
    for max_steps in (1, 200):
        response = await say(client, "ReAct", "hello", max_steps=max_steps)
        assert response.status_code == 200


async def test_white_space_message_is_400(client: AsyncClient) -> None:
    response = await say(client, "ReAct", "   \n\t ")
    assert response.status_code == 400
    assert "white space" in response.json()["detail"]


async def test_unknown_feature_is_404_naming_the_available_ones(client: AsyncClient) -> None:
    for response in (
        await say(client, "Nope", "hi"),
        await client.post(
            "/playground/resume", json={"feature": "Nope", "thread_id": "t", "value": {}}
        ),
    ):
        assert response.status_code == 404
        assert "Nope" in response.json()["detail"] and "ReAct" in response.json()["detail"]


async def test_resume_of_a_thread_that_is_not_waiting_is_400(client: AsyncClient) -> None:
    turn = (await say(client, "ReAct", "hi")).json()
    for thread_id in (turn["thread_id"], "never-used"):
        response = await client.post(
            "/playground/resume",
            json={"feature": "ReAct", "thread_id": thread_id, "value": {"decisions": []}},
        )
        assert response.status_code == 400
        assert "not waiting" in response.json()["detail"]


async def test_a_thread_belongs_to_one_feature(client: AsyncClient) -> None:
    turn = (await say(client, "ReAct", "hi")).json()
    response = await say(client, "Subagents", "hi", thread_id=turn["thread_id"])
    assert response.status_code == 400
    assert "belongs to feature 'ReAct'" in response.json()["detail"]


async def test_provider_key_missing_is_503_with_the_reason(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(default_model="openai/gpt-4o-mini", provider_env={})
    async for client in start_client(create_app(settings)):
        assert (await client.get("/playground/features")).status_code == 200
        response = await say(client, "ReAct", "hi")
        assert response.status_code == 503
        assert "OPENAI_API_KEY" in response.json()["detail"]
        chat = await client.post("/chat", json={"message": "hi"})
        assert chat.status_code == 503


async def test_playground_off_answers_404_everywhere(
    settings_factory: Callable[..., Settings],
) -> None:
    async for client in start_client(create_app(settings_factory(playground_enabled=False))):
        assert (await client.get("/playground/features")).status_code == 404
        assert (await say(client, "ReAct", "hi")).status_code == 404
        resume = {"feature": "ReAct", "thread_id": "t", "value": {}}
        assert (await client.post("/playground/resume", json=resume)).status_code == 404
        assert (await client.post("/chat", json={"message": "hi"})).status_code == 404
        assert (await client.get("/health")).status_code == 200


async def test_chat_answers_and_continues_a_thread(client: AsyncClient) -> None:
    first = await client.post("/chat", json={"message": "my name is Budi"})
    assert first.status_code == 200
    thread_id = first.json()["thread_id"]
    second = await client.post(
        "/chat", json={"message": "what is my name?", "thread_id": thread_id}
    )
    assert second.json()["thread_id"] == thread_id
    assert "Your name is Budi." in second.json()["answer"]
    weather = await client.post("/chat", json={"message": "What is the weather in sf?"})
    assert "San Francisco" in weather.json()["answer"]


async def test_health_reports_the_database(client: AsyncClient, database_url: str) -> None:
    response = await client.get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.json()["database"] == database_url.split(":")[0]


async def test_openapi_documents_the_playground(client: AsyncClient) -> None:
    schema = (await client.get("/openapi.json")).json()
    assert {
        "/playground/features",
        "/playground/messages",
        "/playground/resume",
        "/chat",
        "/health",
    } <= set(schema["paths"])
    assert (await client.get("/docs")).status_code == 200


class TestCustomFeatures:
    @pytest.fixture
    async def custom_client(self, settings_factory: Callable[..., Settings]) -> Any:
        features = [f"{CUSTOM}:ASK_NAME", f"{CUSTOM}:MORE_FEATURES", f"{CUSTOM}:echo_graph"]
        async for client in start_client(create_app(settings_factory(features=features))):
            yield client

    async def test_user_features_are_listed_after_the_built_in_ones(
        self, custom_client: AsyncClient
    ) -> None:
        names = [f["name"] for f in (await custom_client.get("/playground/features")).json()]
        assert names[3:] == ["Ask name", "Runaway subagent", "echo_graph"]

    async def test_a_registered_graph_runs(self, custom_client: AsyncClient) -> None:
        turn = (await say(custom_client, "echo_graph", "ping")).json()
        assert turn["answer"] == "echo: ping" and nodes(turn) == [(0, "echo")]

    async def test_other_pauses_get_the_value_as_it_is(self, custom_client: AsyncClient) -> None:
        turn = (await say(custom_client, "Ask name", "hi")).json()
        assert turn["pending_review"] == {"question": "What is your name?"}
        resumed = await custom_client.post(
            "/playground/resume",
            json={"feature": "Ask name", "thread_id": turn["thread_id"], "value": "Sari"},
        )
        assert resumed.status_code == 200
        assert resumed.json()["answer"] == "Hello, Sari!"

    async def test_max_steps_stops_a_runaway_subagent(self, custom_client: AsyncClient) -> None:
        turn = (await say(custom_client, "Runaway subagent", "go", max_steps=6)).json()
        assert turn["error"]["type"] == "GraphRecursionError"
        depths = [depth for depth, _ in nodes(turn)]
        assert depths[0] == 0 and set(depths[1:]) == {1}
        assert len(depths) == 1 + 6
