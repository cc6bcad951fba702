"""ADK shapes: messages of a Juru thread as ADK event dicts, and sessions as ADK session dicts.

A session's events are rebuilt from its thread's checkpointed messages. The user message that
opens an invocation carries the invocation's id and start time, which every event of that
invocation reports (the checkpoint keeps no time per message).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from juru.store.runtime_sessions import RuntimeSessionRecord

INVOCATION_KEY = "juru_invocation"
REVIEW_FUNCTION = "juru_review"
USER_AUTHOR = "user"


def user_message(text: str, invocation_id: str, timestamp: float) -> HumanMessage:
    """The user's message, marked as the start of an invocation."""
    return HumanMessage(
        text,
        id=f"{invocation_id}-user",
        additional_kwargs={INVOCATION_KEY: {"id": invocation_id, "timestamp": timestamp}},
    )


def _parts(message: BaseMessage) -> tuple[str, list[dict[str, Any]]]:
    """The role and parts of a message's ADK content ("", [] for messages ADK has no event for)."""
    if isinstance(message, HumanMessage):
        return "user", [{"text": message.text}]
    if isinstance(message, AIMessage):
        parts: list[dict[str, Any]] = [{"text": message.text}] if message.text else []
        parts.extend(
            {"function_call": {"id": call["id"], "name": call["name"], "args": dict(call["args"])}}
            for call in message.tool_calls
        )
        return "model", parts
    if isinstance(message, ToolMessage):
        outcome = "error" if message.status == "error" else "result"
        response = {
            "id": message.tool_call_id,
            "name": message.name or "",
            "response": {outcome: message.text},
        }
        return "user", [{"function_response": response}]
    return "", []


def event_of(
    message: BaseMessage, author: str, invocation_id: str, timestamp: float
) -> dict[str, Any] | None:
    """The ADK event dict (snake_case) for one message, or None when it stands for none."""
    role, parts = _parts(message)
    if not parts:
        return None
    return {
        "content": {"role": role, "parts": parts},
        "author": USER_AUTHOR if isinstance(message, HumanMessage) else author,
        "id": message.id or f"evt_{uuid.uuid4().hex}",
        "invocation_id": invocation_id,
        "timestamp": timestamp,
    }


def review_event(pending: Any, author: str, invocation_id: str, timestamp: float) -> dict[str, Any]:
    """A paused turn's last event, as ADK reports a long-running tool: a `juru_review` function
    call (its args are the pending review) whose id is in `long_running_tool_ids`."""
    call_id = f"{invocation_id}-review"
    call = {"id": call_id, "name": REVIEW_FUNCTION, "args": pending}
    return {
        "content": {"role": "model", "parts": [{"function_call": call}]},
        "author": author,
        "id": f"evt_{uuid.uuid4().hex}",
        "invocation_id": invocation_id,
        "timestamp": timestamp,
        "long_running_tool_ids": [call_id],
    }


def events_of(messages: Sequence[BaseMessage], author: str) -> list[dict[str, Any]]:
    """The events of a whole thread, in order."""
    events: list[dict[str, Any]] = []
    invocation_id, timestamp = "", 0.0
    for message in messages:
        marker = message.additional_kwargs.get(INVOCATION_KEY)
        if isinstance(message, HumanMessage) and isinstance(marker, dict):
            invocation_id, timestamp = str(marker["id"]), float(marker["timestamp"])
        event = event_of(message, author, invocation_id, timestamp)
        if event is not None:
            events.append(event)
    return events


def session_dict(
    record: RuntimeSessionRecord, events: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """An ADK session: id, app_name, user_id, state, events, last_update_time (epoch seconds)."""
    return {
        "id": record.id,
        "app_name": record.app_name,
        "user_id": record.user_id,
        "state": record.state,
        "events": events or [],
        "last_update_time": record.updated_at.timestamp(),
    }
