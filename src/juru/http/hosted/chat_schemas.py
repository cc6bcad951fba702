"""The response bodies of `POST /v1/chat/completions`, as OpenAI's clients read them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


def _absent(value: object) -> bool:
    return value is None


class ChatFunctionCall(BaseModel):
    name: str
    arguments: str = Field(description="The arguments as a JSON text.")


class ChatToolCall(BaseModel):
    id: str
    type: Literal["function"]
    function: ChatFunctionCall


class ChatMessageOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["assistant"]
    content: str | None
    tool_calls: list[ChatToolCall] | None = Field(default=None, exclude_if=_absent)


class ChatChoice(BaseModel):
    index: int
    message: ChatMessageOut
    finish_reason: FinishReason


class ChatUsage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletionOut(BaseModel):
    """The answer of a call without `stream`."""

    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: ChatUsage


class ChatFunctionDelta(BaseModel):
    name: str | None = Field(default=None, exclude_if=_absent)
    arguments: str | None = Field(default=None, exclude_if=_absent)


class ChatToolCallDelta(BaseModel):
    index: int
    id: str | None = Field(default=None, exclude_if=_absent)
    type: Literal["function"] | None = Field(default=None, exclude_if=_absent)
    function: ChatFunctionDelta


class ChatDelta(BaseModel):
    role: Literal["assistant"] | None = Field(default=None, exclude_if=_absent)
    content: str | None = Field(default=None, exclude_if=_absent)
    tool_calls: list[ChatToolCallDelta] | None = Field(default=None, exclude_if=_absent)


class ChatChunkChoice(BaseModel):
    index: int
    delta: ChatDelta
    finish_reason: FinishReason | None


class ChatCompletionChunk(BaseModel):
    """One `data:` event of a streamed answer. The last chunk before `[DONE]` has empty
    `choices` and the `usage` when `stream_options.include_usage` was set."""

    id: str
    object: Literal["chat.completion.chunk"]
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: ChatUsage | None = Field(default=None, exclude_if=_absent)


STREAM_DESCRIPTION = (
    "With `stream: true`: server-sent events, one `data: <ChatCompletionChunk JSON>` event per "
    "chunk, then `data: [DONE]`. A failure after the first chunk arrives as a last "
    "`data: <ErrorEnvelope JSON>` event."
)
