"""`/playground/*` and `/chat`: run a feature for one message and show every step."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from juru.core.text import public_message
from juru.http.deps import PlaygroundService
from juru.http.schemas import ChatIn, ChatOut, FeatureOut, MessageIn, ResumeIn, TurnOut

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


@router.post("/chat")
async def chat(body: ChatIn, playground: PlaygroundService) -> ChatOut:
    """Talk to the ReAct agent: the answer and the thread id to continue with."""
    turn = await playground.send_message(CHAT_FEATURE, body.message, body.thread_id, 25)
    if turn.error is not None:
        failure = public_message(f"{turn.error.type}: {turn.error.message}")
        raise HTTPException(500, f"the agent failed: {failure}")
    return ChatOut(answer=turn.answer or "", thread_id=turn.thread_id)
