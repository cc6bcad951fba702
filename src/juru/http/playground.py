"""`/playground/*` and `/chat`: run a feature for one message and show every step."""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator

from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse
from fastapi.sse import format_sse_event
from pydantic import BaseModel

from juru import runner
from juru.core.text import public_message
from juru.http.deps import PlaygroundService
from juru.http.schemas import (
    ChatIn,
    ChatOut,
    FeatureOut,
    MessageIn,
    ResumeIn,
    StepOut,
    TextOut,
    TurnOut,
)
from juru.playground import TurnItem

logger = logging.getLogger(__name__)
STREAM_DESCRIPTION = (
    "Server-sent events: `step` (a finished step, as in the turn's `steps`) as each one "
    "finishes, `text` (a piece of a model's text as it writes it) and last `turn` (the whole "
    "turn, as the non-streaming endpoint answers it); an `error` event ends a stream that "
    "failed after it started. Refusals before it starts keep their status codes."
)
STREAM = {
    "description": STREAM_DESCRIPTION,
    "content": {
        "text/event-stream": {
            "schema": {
                "type": "object",
                "required": ["event", "data"],
                "properties": {
                    "event": {"enum": ["step", "text", "turn", "error"]},
                    "data": {"type": "string", "contentMediaType": "application/json"},
                },
            }
        }
    },
}

CHAT_FEATURE = "ReAct"

router = APIRouter(tags=["playground"])


@router.get("/playground/features")
async def list_features(playground: PlaygroundService) -> list[FeatureOut]:
    """The features that can be tried, in registration order."""
    return [FeatureOut.of(feature) for feature in playground.features()]


@router.post("/playground/messages")
async def send_message(body: MessageIn, playground: PlaygroundService) -> TurnOut:
    """Send one user message to a feature and run it until it answers, pauses or fails."""
    turn = await playground.send_message(body.feature, body.message, body.thread_id, body.max_steps)
    return TurnOut.of(turn)


@router.post("/playground/resume")
async def resume(body: ResumeIn, playground: PlaygroundService) -> TurnOut:
    """Resume a feature paused in `interrupt()`, e.g. with review decisions."""
    turn = await playground.resume(body.feature, body.thread_id, body.value, body.max_steps)
    return TurnOut.of(turn)


def _event(kind: str, data: BaseModel) -> bytes:
    return format_sse_event(event=kind, data_str=data.model_dump_json())


class StreamErrorOut(BaseModel):
    detail: str


async def _turn_events(items: AsyncIterator[TurnItem]) -> AsyncIterator[bytes]:
    try:
        async for item in items:
            if isinstance(item, runner.Step):
                yield _event("step", StepOut.of(item))
            elif isinstance(item, runner.TextDelta):
                yield _event("text", TextOut(text=item.text, depth=item.depth))
            else:
                yield _event("turn", TurnOut.of(item))
    except Exception:
        reference = uuid.uuid4().hex[:12]
        logger.exception("a playground stream failed after it started (ref %s)", reference)
        detail = f"the turn failed on the server (reference {reference})"
        yield _event("error", StreamErrorOut(detail=detail))


def _stream(items: AsyncIterator[TurnItem]) -> StreamingResponse:
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    return StreamingResponse(_turn_events(items), media_type="text/event-stream", headers=headers)


@router.post(
    "/playground/messages/stream", response_class=StreamingResponse, responses={200: STREAM}
)
async def stream_message(body: MessageIn, playground: PlaygroundService) -> StreamingResponse:
    """`POST /playground/messages` as server-sent events, each step as it finishes."""
    return _stream(
        await playground.stream_message(body.feature, body.message, body.thread_id, body.max_steps)
    )


@router.post("/playground/resume/stream", response_class=StreamingResponse, responses={200: STREAM})
async def stream_resume(body: ResumeIn, playground: PlaygroundService) -> StreamingResponse:
    """`POST /playground/resume` as server-sent events, each step as it finishes."""
    return _stream(
        await playground.stream_resume(body.feature, body.thread_id, body.value, body.max_steps)
    )


@router.post("/chat")
async def chat(body: ChatIn, playground: PlaygroundService) -> ChatOut:
    """Talk to the ReAct agent: the answer and the thread id to continue with."""
    turn = await playground.send_message(CHAT_FEATURE, body.message, body.thread_id, 25)
    if turn.error is not None:
        failure = public_message(f"{turn.error.type}: {turn.error.message}")
        raise HTTPException(500, f"the agent failed: {failure}")
    return ChatOut(answer=turn.answer or "", thread_id=turn.thread_id)
