"""The peers' graph: one ReAct loop with a server-side tool, the same for every runtime.

A plain LangGraph `StateGraph`: `llm_call` (ChatOpenAI with one tool bound) -> `tools` (runs
the trivial `get_weather` in-process) -> back to `llm_call`, until the model answers without a
tool call. On the fake model (`--tool-name get_weather --tool-calls 4`) a run is 5 model steps.

It is served three ways, all compiled from `build_react_graph`:

- the bare runtime (`bench/scenarios/peers.py`) compiles it in-process with a LangGraph saver;
- Juru loads it as a playground feature: `JURU_FEATURES=bench.graphs:react_feature`;
- Aegra loads this file by path (`aegra.json`: `"react": ".../bench/graphs.py:aegra_graph"`)
  in its own virtual environment, where Juru is not installed: so this module imports only
  LangGraph and LangChain at the top, and `react_feature` is made on first access.

The model is found at `$OPENAI_BASE_URL` unless `base_url` is given. No `from __future__ import
annotations` here: Aegra imports the file without registering it in `sys.modules`, where
LangGraph would look up the state's string annotations.
"""

import os
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

TOOL_NAME = "get_weather"
FEATURE_NAME = "bench-react"
MODEL = "gpt-4o"


@tool(TOOL_NAME)
def get_weather(step: int = 0) -> str:
    """The weather (always the same; `step` is the fake model's counter)."""
    return "sunny, 24 degrees"


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_react_graph(base_url: str | None = None, api_key: str | None = None) -> Any:
    """The ReAct graph, compiled without a checkpointer (each runtime gives its own)."""
    model = ChatOpenAI(
        model=MODEL,
        base_url=base_url or os.environ.get("OPENAI_BASE_URL"),
        api_key=api_key or os.environ.get("OPENAI_API_KEY") or "bench",
    ).bind_tools([get_weather])

    async def llm_call(state: State) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    async def tools(state: State) -> dict[str, Any]:
        last = state["messages"][-1]
        assert isinstance(last, AIMessage)
        results: list[ToolMessage] = []
        for call in last.tool_calls:
            output = await get_weather.ainvoke(call["args"])
            results.append(ToolMessage(output, tool_call_id=call["id"], name=call["name"]))
        return {"messages": results}

    def route(state: State) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(State)
    builder.add_node("llm_call", llm_call)
    builder.add_node("tools", tools)
    builder.add_edge(START, "llm_call")
    builder.add_conditional_edges("llm_call", route, ["tools", END])
    builder.add_edge("tools", "llm_call")
    return builder.compile(name="bench ReAct")


async def aegra_graph() -> Any:
    """Aegra's entry point (it awaits a callable export)."""
    return build_react_graph()


def __getattr__(name: str) -> Any:
    """`react_feature`: the graph as a Juru feature (imports Juru only when asked for)."""
    if name == "react_feature":
        from juru.agents.features import Feature

        return Feature(
            name=FEATURE_NAME,
            description="The bench's ReAct graph with a server-side tool",
            build_agent=build_react_graph,
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
