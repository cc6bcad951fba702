"""Features registered through JURU_FEATURES in tests, the way users add their own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from juru.agents.builtin import build_subagents
from juru.agents.features import Feature


class CallFirstToolForever(BaseChatModel):
    """A model that never stops: every reply calls the first tool it was given."""

    tool_names: tuple[str, ...] = ()

    @property
    def _llm_type(self) -> str:
        return "call-first-tool-forever"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, BaseMessage]:
        names = tuple(tool.name for tool in tools)
        return CallFirstToolForever(tool_names=names)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        name = self.tool_names[0]
        argument = "request" if name.startswith("ask_") else "location"
        call = {"id": f"call_{len(messages)}", "name": name, "args": {argument: "nowhere"}}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])


def _ask_name_graph() -> Any:
    def ask(state: MessagesState) -> dict[str, Any]:
        name = interrupt({"question": "What is your name?"})
        return {"messages": [AIMessage(f"Hello, {name}!")]}

    graph = StateGraph(MessagesState)
    graph.add_node("ask", ask)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", END)
    return graph.compile()


ASK_NAME = Feature(
    name="Ask name",
    description="Pauses with a question that is not a tool review.",
    build_agent=_ask_name_graph,
)

MORE_FEATURES = [
    Feature(
        name="Runaway subagent",
        description="A supervisor whose weather subagent never stops calling tools.",
        build_agent=lambda: build_subagents(CallFirstToolForever()),
    )
]


def _echo(state: MessagesState) -> dict[str, Any]:
    return {"messages": [AIMessage(f"echo: {state['messages'][-1].text}")]}


_echo_builder = StateGraph(MessagesState)
_echo_builder.add_node("echo", _echo)
_echo_builder.add_edge(START, "echo")
_echo_builder.add_edge("echo", END)
echo_graph = _echo_builder.compile()

NOT_A_FEATURE = 42
