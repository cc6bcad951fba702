"""LangChain messages as transcript entries (the shape `GET /v1/threads/:id/messages` shows)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from juru.agents.hosted import pending_call

ROLE_BY_TYPE: dict[type[BaseMessage], str] = {
    HumanMessage: "user",
    AIMessage: "assistant",
    ToolMessage: "tool",
    SystemMessage: "system",
}


def transcript_entry(message: BaseMessage) -> dict[str, Any] | None:
    role = next((r for kind, r in ROLE_BY_TYPE.items() if isinstance(message, kind)), None)
    if role is None or message.id is None:
        return None
    tool_calls = None
    if isinstance(message, AIMessage) and message.tool_calls:
        tool_calls = [pending_call(dict(call)) for call in message.tool_calls]
    return {
        "message_id": message.id,
        "role": role,
        "content": message.text,
        "tool_calls": tool_calls,
        "tool_call_id": message.tool_call_id if isinstance(message, ToolMessage) else None,
        "name": message.name if isinstance(message, ToolMessage) else None,
    }


def transcript_entries(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return [entry for m in messages if (entry := transcript_entry(m)) is not None]
