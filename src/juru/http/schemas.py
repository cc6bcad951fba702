"""Request and response bodies of the playground face."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from juru import runner
from juru.agents.features import Feature

MAX_STEPS_FIELD = Field(default=runner.DEFAULT_MAX_STEPS, ge=1, le=200)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FeatureOut(BaseModel):
    name: str
    description: str
    examples: list[str]

    @classmethod
    def of(cls, feature: Feature) -> FeatureOut:
        return cls(
            name=feature.name, description=feature.description, examples=list(feature.examples)
        )


class MessageIn(_Body):
    feature: str
    message: str = Field(min_length=1)
    thread_id: str | None = Field(default=None, max_length=200)
    max_steps: int = MAX_STEPS_FIELD


class ResumeIn(_Body):
    feature: str
    thread_id: str = Field(min_length=1, max_length=200)
    value: Any
    max_steps: int = MAX_STEPS_FIELD


class EventOut(BaseModel):
    type: str
    name: str | None
    args: dict[str, Any] | None
    content: str | None
    failed: bool


class StepOut(BaseModel):
    node: str
    depth: int
    events: list[EventOut]

    @classmethod
    def of(cls, step: runner.Step) -> StepOut:
        events = [EventOut(**vars(event)) for event in step.events]
        return cls(node=step.node, depth=step.depth, events=events)


class TextOut(BaseModel):
    """A piece of the text a model is writing, at the depth of the graph it runs in."""

    text: str
    depth: int


class ErrorOut(BaseModel):
    type: str
    message: str


class TurnOut(BaseModel):
    thread_id: str
    answer: str | None
    pending_review: Any | None
    error: ErrorOut | None
    seconds: float
    steps: list[StepOut]

    @classmethod
    def of(cls, turn: runner.Turn) -> TurnOut:
        return cls(
            thread_id=turn.thread_id,
            answer=turn.answer,
            pending_review=turn.pending_review,
            error=ErrorOut(type=turn.error.type, message=turn.error.message)
            if turn.error
            else None,
            seconds=round(turn.seconds, 3),
            steps=[StepOut.of(step) for step in turn.steps],
        )


class ChatIn(_Body):
    message: str = Field(min_length=1)
    thread_id: str | None = Field(default=None, max_length=200)


class ChatOut(BaseModel):
    answer: str
    thread_id: str
