"""The runner on the real checkpointers: pending reviews, refusals, streaming, failures."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.pregel import Pregel

from juru import runner
from juru.agents.builtin import build_human_in_the_loop, build_react
from juru.models.catalog import ModelCatalog
from juru.models.demo import DemoChatModel
from juru.store.checkpointer import open_checkpointer
from juru.store.urls import DatabaseUrl
from tests.conftest import openai_env
from tests.support.fake_openai import FakeOpenAIServer

EMAIL = "Send an email to ana@example.com about lunch"


@pytest.fixture
async def checkpointer(database_url: str) -> AsyncIterator[Any]:
    async with open_checkpointer(DatabaseUrl.parse(database_url)) as saver:
        yield saver


@pytest.fixture
def hitl(checkpointer: Any) -> Pregel[Any, Any, Any, Any]:
    return build_human_in_the_loop(DemoChatModel()).copy({"checkpointer": checkpointer})


async def test_pending_review_round_trip(hitl: Pregel[Any, Any, Any, Any]) -> None:
    assert await runner.pending_review_of(hitl, "t") is None
    turn = await runner.send_message(hitl, EMAIL, "t")
    assert turn.answer is None and turn.error is None
    assert await runner.pending_review_of(hitl, "t") == turn.pending_review
    done = await runner.submit_review(hitl, [{"type": "approve"}], "t")
    assert done.answer is not None and "ana@example.com" in done.answer
    assert await runner.pending_review_of(hitl, "t") is None


async def test_refusals_happen_before_anything_runs(hitl: Pregel[Any, Any, Any, Any]) -> None:
    with pytest.raises(runner.NothingToResumeError):
        await runner.resume(hitl, "anything", "t")
    await runner.send_message(hitl, EMAIL, "t")
    history_before = [c async for c in hitl.checkpointer.alist(None)]  # type: ignore[union-attr]
    with pytest.raises(runner.ThreadAwaitingReviewError):
        await runner.send_message(hitl, "hello?", "t")
    with pytest.raises(runner.InvalidReviewError):
        await runner.submit_review(hitl, [{"type": "edit"}], "t")
    history_after = [c async for c in hitl.checkpointer.alist(None)]  # type: ignore[union-attr]
    assert len(history_after) == len(history_before)
    assert (await runner.submit_review(hitl, [{"type": "reject"}], "t")).error is None


async def test_steps_stream_as_they_finish(
    checkpointer: Any, fake_openai: FakeOpenAIServer
) -> None:
    catalog = ModelCatalog.load()
    model = catalog.chat_model("openai/gpt-4o-mini", openai_env(fake_openai))
    agent = build_react(model).copy({"checkpointer": checkpointer})
    fake_openai.script(
        [
            {"tool_calls": [{"name": "get_weather", "arguments": {"location": "Oslo"}}]},
            {"content": "Fine in Oslo."},
        ]
    )
    stream = runner.stream_message(agent, "Oslo?", "s")
    requests_seen_at_each_step = []
    async for step in stream:
        requests_seen_at_each_step.append((step.node, len(fake_openai.requests())))
    assert requests_seen_at_each_step == [("llm_call", 1), ("tool_node", 1), ("llm_call", 2)]
    assert stream.turn.answer == "Fine in Oslo."
    assert [step.node for step in stream.turn.steps] == ["llm_call", "tool_node", "llm_call"]
    await catalog.aclose()


async def test_an_exception_becomes_the_turn_error_with_the_steps_so_far(
    checkpointer: Any,
) -> None:
    agent = build_react(DemoChatModel()).copy({"checkpointer": checkpointer})
    turn = await runner.send_message(agent, "What is the weather in sf?", "e", max_steps=2)
    assert turn.error is not None and turn.error.type == "GraphRecursionError"
    assert [step.node for step in turn.steps] == ["llm_call", "tool_node"]
    assert turn.answer is None and turn.seconds > 0
