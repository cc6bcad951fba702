"""The tool-calling agent graph every built-in agent is made of.

`llm_call` asks the model; its tool calls go to `review` when some need a human decision, else
straight to `tool_node`; tool results go back to `llm_call`; a reply without tool calls ends.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Collection, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.errors import GraphBubbleUp, GraphRecursionError
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

from juru.review import DEFAULT_REJECTION, Decision, review_request, validate_review

LLM_NODE = "llm_call"
TOOL_NODE = "tool_node"
REVIEW_NODE = "review"
UNANSWERED_CALL_TEXT = "This tool call was never answered (the turn stopped before it ran)."


def last_ai_message(messages: Sequence[AnyMessage]) -> AIMessage | None:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    return None


def unanswered_calls(messages: Sequence[AnyMessage]) -> list[dict[str, Any]]:
    """Tool calls of the last AI message that no tool result answers yet."""
    ai = last_ai_message(messages)
    if ai is None:
        return []
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [dict(call) for call in ai.tool_calls if call["id"] not in answered]


def close_dangling_calls(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The history with an error result after every tool call that was never answered.

    Providers refuse a history whose tool calls lack results; a turn that failed or was
    stopped half-way leaves such calls behind, and the next model call must still work.
    """
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    repaired: list[AnyMessage] = []
    for message in messages:
        repaired.append(message)
        if isinstance(message, AIMessage):
            repaired.extend(
                ToolMessage(
                    UNANSWERED_CALL_TEXT,
                    tool_call_id=call["id"],
                    name=call["name"],
                    status="error",
                )
                for call in message.tool_calls
                if call["id"] not in answered
            )
    return repaired


def error_result(call: dict[str, Any], text: str) -> ToolMessage:
    return ToolMessage(
        text, tool_call_id=call["id"], name=call["name"], status="error", id=_message_id()
    )


def _message_id() -> str:
    # Set at creation, so a streamed step and the checkpoint show a tool result with one id.
    return f"msg_{uuid.uuid4().hex}"


async def _run_tool(tools: dict[str, BaseTool], call: dict[str, Any]) -> ToolMessage:
    tool = tools.get(call["name"])
    if tool is None:
        return error_result(call, f"Error: there is no tool named {call['name']!r}.")
    try:
        result = await tool.ainvoke({**call, "type": "tool_call"})
    except (GraphBubbleUp, GraphRecursionError):
        raise
    except Exception as error:
        return error_result(call, f"Error: {type(error).__name__}: {error}")
    if isinstance(result, ToolMessage):
        result.id = result.id or _message_id()
        return result
    return ToolMessage(str(result), tool_call_id=call["id"], name=call["name"], id=_message_id())


class ToolAgent:
    """The nodes of one agent: a model, its tools, and the tools that need review."""

    def __init__(
        self,
        model: BaseChatModel,
        tools: Sequence[BaseTool],
        system_prompt: str = "",
        guarded: Collection[str] = (),
    ) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.model = model.bind_tools(list(tools)) if tools else model
        self.system_prompt = system_prompt
        self.guarded = frozenset(guarded)

    async def llm_call(self, state: MessagesState) -> dict[str, Any]:
        history: list[AnyMessage] = close_dangling_calls(state["messages"])
        if self.system_prompt:
            history = [SystemMessage(self.system_prompt), *history]
        reply = await self.model.ainvoke(history)
        return {"messages": [reply]}

    # A coroutine: LangGraph would run a plain function in a thread of the executor.
    async def after_llm(self, state: MessagesState) -> str:
        calls = unanswered_calls(state["messages"])
        if not calls:
            return END
        if any(call["name"] in self.guarded for call in calls):
            return REVIEW_NODE
        return TOOL_NODE

    async def review(self, state: MessagesState) -> Command[str]:
        calls = unanswered_calls(state["messages"])
        guarded = [call for call in calls if call["name"] in self.guarded]
        descriptions = {name: tool.description for name, tool in self.tools.items()}
        request = review_request(guarded, descriptions)
        decisions = validate_review(request, interrupt(request))
        ai = last_ai_message(state["messages"])
        assert ai is not None
        results, edited_calls = self._apply(guarded, decisions)
        updates: list[AnyMessage] = list(results)
        if edited_calls:
            new_calls = [edited_calls.get(call["id"] or "", call) for call in ai.tool_calls]
            updates.insert(0, ai.model_copy(update={"tool_calls": new_calls}))
        answered = {result.tool_call_id for result in results}
        runnable = [call for call in calls if call["id"] not in answered]
        return Command(update={"messages": updates}, goto=TOOL_NODE if runnable else LLM_NODE)

    def _apply(
        self, guarded: list[dict[str, Any]], decisions: list[Decision]
    ) -> tuple[list[ToolMessage], dict[str, Any]]:
        results: list[ToolMessage] = []
        edited: dict[str, Any] = {}
        for call, decision in zip(guarded, decisions, strict=True):
            if decision.type == "reject":
                results.append(error_result(call, decision.message or DEFAULT_REJECTION))
            elif decision.type == "edit":
                name = decision.edited_name or call["name"]
                if name not in self.tools:
                    results.append(
                        error_result(
                            {**call, "name": name},
                            f"Error: the reviewer edited this call to {name!r}, "
                            "which is not one of this agent's tools.",
                        )
                    )
                else:
                    edited[call["id"]] = {**call, "name": name, "args": decision.edited_args}
        return results, edited

    async def tool_node(self, state: MessagesState) -> dict[str, Any]:
        calls = unanswered_calls(state["messages"])
        results = await asyncio.gather(*(_run_tool(self.tools, call) for call in calls))
        return {"messages": list(results)}

    def compile(
        self, checkpointer: BaseCheckpointSaver[Any] | bool | None = None, name: str | None = None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        graph = StateGraph(MessagesState)
        graph.add_node(LLM_NODE, self.llm_call)
        graph.add_node(TOOL_NODE, self.tool_node)
        graph.add_edge(START, LLM_NODE)
        graph.add_edge(TOOL_NODE, LLM_NODE)
        if self.guarded:
            graph.add_node(REVIEW_NODE, self.review, destinations=(TOOL_NODE, LLM_NODE))
            graph.add_conditional_edges(LLM_NODE, self.after_llm, [REVIEW_NODE, TOOL_NODE, END])
        else:
            graph.add_conditional_edges(LLM_NODE, self.after_llm, [TOOL_NODE, END])
        return graph.compile(checkpointer=checkpointer, name=name)


def build_tool_agent(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    *,
    system_prompt: str = "",
    guarded: Collection[str] = (),
    checkpointer: BaseCheckpointSaver[Any] | bool | None = None,
    name: str | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the tool-calling graph for `model` and `tools`."""
    return ToolAgent(model, tools, system_prompt, guarded).compile(checkpointer, name)
