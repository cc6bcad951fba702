"""When a playground turn saves its thread: once, as the turn ends (`durability` "exit", the
default), or after every step as well (`playground_durability="async"`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from fastapi import FastAPI
from httpx import AsyncClient

from juru.app import create_app
from juru.playground import checkpoint_thread
from juru.settings import Settings
from juru.store.pruning import count_checkpoints
from tests.conftest import start_client
from tests.integration.test_playground_api import say


@pytest.fixture
async def served(
    settings_factory: Callable[..., Settings], request: pytest.FixtureRequest
) -> AsyncIterator[tuple[AsyncClient, FastAPI]]:
    overrides = getattr(request, "param", {})
    app = create_app(settings_factory(**overrides))
    async for client in start_client(app):
        yield client, app


async def turn(client: AsyncClient, message: str, **extra: Any) -> dict[str, Any]:
    response = await say(client, "ReAct", message, **extra)
    assert response.status_code == 200, response.text
    answered: dict[str, Any] = response.json()
    return answered


async def checkpoints(app: FastAPI, thread_id: str) -> int:
    return await count_checkpoints(app.state.context.checkpointer, checkpoint_thread(thread_id))


async def saved_messages(app: FastAPI, thread_id: str) -> list[str]:
    config: Any = {"configurable": {"thread_id": checkpoint_thread(thread_id)}}
    saved = await app.state.context.checkpointer.aget_tuple(config)
    return [message.type for message in saved.checkpoint["channel_values"]["messages"]]


async def test_a_turn_saves_its_thread_once_whatever_its_steps(
    served: tuple[AsyncClient, FastAPI],
) -> None:
    client, app = served
    first = await turn(client, "What is the weather in sf?")
    assert len(first["steps"]) == 3  # the call, the tool, the answer
    assert await checkpoints(app, first["thread_id"]) == 1
    await turn(client, "What is the weather in Oslo?", thread_id=first["thread_id"])
    assert await checkpoints(app, first["thread_id"]) == 2
    # What the thread remembers is the whole of both turns.
    assert await saved_messages(app, first["thread_id"]) == ["human", "ai", "tool", "ai"] * 2


@pytest.mark.parametrize("served", [{"playground_durability": "async"}], indirect=True)
async def test_with_async_durability_every_step_is_saved(
    served: tuple[AsyncClient, FastAPI],
) -> None:
    client, app = served
    first = await turn(client, "What is the weather in sf?")
    # LangGraph's two for the input (as given, then as the graph's start), one per step.
    assert await checkpoints(app, first["thread_id"]) == 2 + len(first["steps"])


async def test_a_failed_turn_saves_the_steps_it_took(
    served: tuple[AsyncClient, FastAPI],
) -> None:
    client, app = served
    failed = await turn(client, "What is the weather in sf?", max_steps=1)
    assert failed["error"]["type"] == "GraphRecursionError"
    assert await checkpoints(app, failed["thread_id"]) == 1
    assert await saved_messages(app, failed["thread_id"]) == ["human", "ai"]
