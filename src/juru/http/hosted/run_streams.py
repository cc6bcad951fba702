"""A run's stream as server-sent events: each durable event with its `id`, text deltas without
one, and a heartbeat comment while nothing happens."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi.responses import StreamingResponse
from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event
from pydantic import BaseModel

from juru.core.run_events import RunEventType
from juru.hosted.streams import Heartbeat, MessageDelta, StreamItem
from juru.http.hosted.schemas import MessageDeltaOut, MessageOut, RunOut, StepEventOut
from juru.store.run_log import RunEventRecord

# What a reconnecting client may send back as `Last-Event-ID`: one of the durable ids.
EVENT_ID_PATTERN = r"^[0-9]{1,18}$"
DATA_MODELS: dict[str, type[BaseModel]] = {
    RunEventType.STATUS: RunOut,
    RunEventType.MESSAGE_COMPLETED: MessageOut,
    RunEventType.STEP_COMPLETED: StepEventOut,
    RunEventType.MESSAGE_DELTA: MessageDeltaOut,
}
STREAM_DESCRIPTION = (
    "Server-sent events. Durable events carry `id: <n>` (1, 2, 3, ... per run): `run.status` "
    "(data: the run as `GET /v1/runs/{run_id}` shows it), `message.completed` (data: a message "
    "as `GET /v1/threads/{thread_id}/messages` shows it) and `step.completed` (`step_count`, "
    "running `cost_rupiah`). `message.delta` events carry no id (pieces of a message's text as "
    "the model writes it). A comment line every 15 s keeps the connection open. The stream "
    "closes right after the `run.status` of a terminal status; reconnect with "
    "`Last-Event-ID: <n>` (or `?after=<n>`) to receive the events after n."
)
STREAM_EVENT: dict[str, Any] = {
    "description": STREAM_DESCRIPTION,
    "type": "object",
    "required": ["event", "data"],
    "properties": {
        "id": {"type": "string", "description": "The event's id in the run's log (durable)."},
        "event": {"enum": [kind.value for kind in RunEventType]},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {
                "anyOf": [
                    {"$ref": f"#/components/schemas/{model.__name__}"}
                    for model in dict.fromkeys(DATA_MODELS.values())
                ]
            },
        },
    },
}
RESPONSE = {
    "description": "The run's events.",
    "content": {"text/event-stream": {"schema": STREAM_EVENT}},
}


def _durable(event: RunEventRecord) -> bytes:
    data: BaseModel
    if event.type == RunEventType.STATUS:
        data = RunOut.of(event.data)
    elif event.type == RunEventType.MESSAGE_COMPLETED:
        data = MessageOut.model_validate({**event.data, "id": event.data["message_id"]})
    else:
        data = DATA_MODELS[event.type].model_validate(event.data)
    return format_sse_event(data_str=data.model_dump_json(), event=event.type, id=str(event.seq))


def encode(item: StreamItem) -> bytes:
    """One item of a run's stream on the wire."""
    if isinstance(item, Heartbeat):
        return KEEPALIVE_COMMENT
    if isinstance(item, MessageDelta):
        data = MessageDeltaOut(message_id=item.message_id, delta=item.delta)
        return format_sse_event(data_str=data.model_dump_json(), event=RunEventType.MESSAGE_DELTA)
    return _durable(item)


async def _wire(items: AsyncIterator[StreamItem]) -> AsyncIterator[bytes]:
    async for item in items:
        yield encode(item)


def event_stream(items: AsyncIterator[StreamItem]) -> StreamingResponse:
    """The response that sends `items` as they come (no buffering by proxies)."""
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(_wire(items), media_type="text/event-stream", headers=headers)
