"""Hosted-agent graphs are compiled once per agent version and model, and the cache is bounded."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from langgraph.checkpoint.memory import InMemorySaver

from juru.engine.graphs import CompiledGraphs
from juru.models.demo import DemoChatModel
from juru.store.records import AgentRecord
from tests.support.hosted import WEATHER_TOOL

NOW = datetime(2026, 1, 1, tzinfo=UTC)
AGENT = AgentRecord(
    id="agt_1",
    account_id="acc_1",
    name="Weather",
    model_id="juru/demo",
    system_prompt="Be brief.",
    tools=[WEATHER_TOOL],
    builtin_tools=[],
    max_steps=20,
    created_at=NOW,
    updated_at=NOW,
)


def test_the_same_agent_and_model_reuse_one_graph() -> None:
    graphs, model = CompiledGraphs(InMemorySaver()), DemoChatModel()
    first = graphs.get(AGENT, model)
    assert graphs.get(replace(AGENT, name="Renamed", max_steps=5), model) is first
    assert first.checkpointer is graphs.checkpointer
    assert len(graphs) == 1


def test_an_edited_agent_or_another_model_gets_a_new_graph() -> None:
    graphs, model = CompiledGraphs(InMemorySaver()), DemoChatModel()
    first = graphs.get(AGENT, model)
    assert graphs.get(replace(AGENT, system_prompt="Be verbose."), model) is not first
    assert graphs.get(replace(AGENT, tools=[]), model) is not first
    assert graphs.get(replace(AGENT, builtin_tools=["rag_search"]), model) is not first
    assert graphs.get(AGENT, DemoChatModel()) is not first
    assert len(graphs) == 5


def test_the_least_recently_used_graph_leaves_first() -> None:
    graphs, model = CompiledGraphs(InMemorySaver(), capacity=2), DemoChatModel()
    one = graphs.get(replace(AGENT, system_prompt="one"), model)
    two = graphs.get(replace(AGENT, system_prompt="two"), model)
    assert graphs.get(replace(AGENT, system_prompt="one"), model) is one  # used again
    graphs.get(replace(AGENT, system_prompt="three"), model)
    assert len(graphs) == 2
    assert graphs.get(replace(AGENT, system_prompt="one"), model) is one
    assert graphs.get(replace(AGENT, system_prompt="two"), model) is not two
