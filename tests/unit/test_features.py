"""Tests for features: lookup, `module:attribute` references, merging and the registry."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.pregel import Pregel

from juru.agents.builtin import builtin_features
from juru.agents.features import (
    Feature,
    FeatureLoadError,
    find_feature,
    load_feature_reference,
    merge_features,
)
from juru.agents.registry import FeatureRegistry, FeatureUnavailableError
from juru.models.catalog import ModelCatalog
from juru.settings import Settings
from tests.support import custom_features

BUILTIN_NAMES = ("ReAct", "Human-in-the-loop", "Subagents")


def small_graph(name: str | None = None) -> Pregel[Any, Any, Any, Any]:
    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("hello")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(name=name)


def feature(name: str, build_agent: Any = small_graph) -> Feature:
    return Feature(name=name, description=f"The {name} feature", build_agent=build_agent)


class CountingBuilder:
    """A build_agent that counts its calls."""

    def __init__(self, result: Any = None) -> None:
        self.calls = 0
        self.graph = small_graph() if result is None else result

    def __call__(self) -> Any:
        self.calls += 1
        return self.graph


# --- find_feature ---------------------------------------------------------------------------------


def test_find_feature_returns_the_named_feature() -> None:
    alpha, beta = feature("alpha"), feature("beta")
    assert find_feature("beta", [alpha, beta]) is beta
    assert find_feature("alpha", iter([alpha, beta])) is alpha


def test_find_feature_raises_key_error_naming_all_available() -> None:
    features = [feature("alpha"), feature("beta"), feature("gamma")]
    with pytest.raises(KeyError) as error:
        find_feature("delta", features)
    message = error.value.args[0]
    assert "'delta'" in message
    assert "available: alpha, beta, gamma" in message


def test_find_feature_in_no_features_says_none() -> None:
    with pytest.raises(KeyError) as error:
        find_feature("alpha", [])
    assert "available: none" in error.value.args[0]


@pytest.fixture
def default_settings_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Default settings: no JURU_DEFAULT_MODEL and no `.env` in the working directory."""
    monkeypatch.delenv("JURU_DEFAULT_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.usefixtures("default_settings_environment")
@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_find_feature_finds_the_builtins(name: str) -> None:
    found = find_feature(name, builtin_features(Settings(), ModelCatalog.load()))
    assert found.name == name
    assert "juru/demo" in found.description
    assert found.examples


@pytest.mark.usefixtures("default_settings_environment")
def test_find_feature_among_the_builtins_names_them() -> None:
    with pytest.raises(KeyError) as error:
        find_feature("Nope", builtin_features(Settings(), ModelCatalog.load()))
    assert "available: ReAct, Human-in-the-loop, Subagents" in error.value.args[0]


# --- load_feature_reference --------------------------------------------------------------------


def test_load_a_feature() -> None:
    assert load_feature_reference("tests.support.custom_features:ASK_NAME") == [
        custom_features.ASK_NAME
    ]


def test_load_a_list_of_features() -> None:
    loaded = load_feature_reference("tests.support.custom_features:MORE_FEATURES")
    assert loaded == custom_features.MORE_FEATURES
    assert [f.name for f in loaded] == ["Runaway subagent"]


def test_load_a_compiled_graph() -> None:
    (loaded,) = load_feature_reference("tests.support.custom_features:echo_graph")
    assert loaded.name == "echo_graph"
    assert loaded.build_agent() is custom_features.echo_graph
    assert "tests.support.custom_features:echo_graph" in loaded.description


def test_a_named_graph_is_described_by_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    named = small_graph(name="Greeter")
    monkeypatch.setattr(custom_features, "GREETER", named, raising=False)
    (loaded,) = load_feature_reference("tests.support.custom_features:GREETER")
    assert loaded.name == "GREETER"
    assert loaded.description == "Greeter"
    assert loaded.build_agent() is named


@pytest.mark.parametrize(
    ("target", "message"),
    [
        pytest.param("no_colon", "must look like 'package.module:attribute'", id="no-colon"),
        pytest.param(":ASK_NAME", "must look like", id="no-module"),
        pytest.param("tests.support.custom_features:", "must look like", id="no-attribute"),
        pytest.param(
            "tests.support.no_such_module_here:THING",
            "cannot import 'tests.support.no_such_module_here'",
            id="unknown-module",
        ),
        pytest.param(
            "tests.support.custom_features:NO_SUCH_THING",
            "has no attribute 'NO_SUCH_THING'",
            id="unknown-attribute",
        ),
        pytest.param(
            "tests.support.custom_features:NOT_A_FEATURE",
            "NOT_A_FEATURE is a int; expected a Feature",
            id="not-a-feature",
        ),
    ],
)
def test_load_feature_reference_errors(target: str, message: str) -> None:
    with pytest.raises(FeatureLoadError) as error:
        load_feature_reference(target)
    assert message in str(error.value)


@pytest.mark.parametrize("value", [[], [custom_features.ASK_NAME, "not a feature"]])
def test_lists_must_hold_only_features(monkeypatch: pytest.MonkeyPatch, value: Any) -> None:
    monkeypatch.setattr(custom_features, "ODD_LIST", value, raising=False)
    with pytest.raises(FeatureLoadError, match="is a list"):
        load_feature_reference("tests.support.custom_features:ODD_LIST")


# --- merge_features -------------------------------------------------------------------------------


def test_merge_features_keeps_order() -> None:
    a, b, c = feature("a"), feature("b"), feature("c")
    assert merge_features([[a, b], [], [c]]) == [a, b, c]


def test_merge_features_rejects_duplicate_names() -> None:
    with pytest.raises(FeatureLoadError, match="two features are named 'b'"):
        merge_features([[feature("a"), feature("b")], [feature("b")]])


def test_merge_features_rejects_duplicates_within_one_group() -> None:
    with pytest.raises(FeatureLoadError, match="'a'"):
        merge_features([[feature("a"), feature("a")]])


# --- FeatureRegistry ------------------------------------------------------------------------------


async def test_registry_agent_uses_the_checkpointer_and_builds_once() -> None:
    builder = CountingBuilder()
    saver = InMemorySaver()
    registry = FeatureRegistry([feature("other"), feature("mine", builder)], saver)

    agent = await registry.agent("mine")
    assert isinstance(agent, Pregel)
    assert agent.checkpointer is saver
    assert await registry.agent("mine") is agent
    assert builder.calls == 1
    # The feature's own graph is left as it was.
    assert builder.graph.checkpointer is None


async def test_registry_builds_once_under_concurrent_requests() -> None:
    builder = CountingBuilder()
    registry = FeatureRegistry([feature("mine", builder)], InMemorySaver())
    agents = await asyncio.gather(*(registry.agent("mine") for _ in range(5)))
    assert builder.calls == 1
    assert all(agent is agents[0] for agent in agents)


async def test_registry_agent_keeps_state_in_the_checkpointer() -> None:
    saver = InMemorySaver()
    registry = FeatureRegistry([feature("mine")], saver)
    agent = await registry.agent("mine")
    config = {"configurable": {"thread_id": "t-1"}}
    await agent.ainvoke({"messages": [("user", "hi")]}, config)
    stored = await saver.aget_tuple(config)  # type: ignore[arg-type]
    assert stored is not None
    assert [m.text for m in stored.checkpoint["channel_values"]["messages"]] == ["hi", "hello"]


async def test_registry_reports_a_failing_build() -> None:
    def broken() -> Any:
        raise RuntimeError("OPENAI_API_KEY is not set")

    registry = FeatureRegistry([feature("broken", broken)], InMemorySaver())
    with pytest.raises(FeatureUnavailableError) as error:
        await registry.agent("broken")
    assert "'broken'" in str(error.value)
    assert "OPENAI_API_KEY is not set" in str(error.value)
    assert isinstance(error.value.__cause__, RuntimeError)


async def test_registry_refuses_a_build_that_is_not_a_graph() -> None:
    builder = CountingBuilder(result="just a string")
    registry = FeatureRegistry([feature("odd", builder)], InMemorySaver())
    with pytest.raises(FeatureUnavailableError, match=r"'odd'.*returned str"):
        await registry.agent("odd")


async def test_registry_unknown_name_raises_key_error() -> None:
    builder = CountingBuilder()
    registry = FeatureRegistry([feature("mine", builder)], InMemorySaver())
    with pytest.raises(KeyError) as error:
        await registry.agent("yours")
    assert "available: mine" in error.value.args[0]
    assert builder.calls == 0


def test_registry_find() -> None:
    mine = feature("mine")
    registry = FeatureRegistry([mine], InMemorySaver())
    assert registry.find("mine") is mine
    with pytest.raises(KeyError):
        registry.find("yours")
