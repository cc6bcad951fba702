"""`POST /v1/chat/completions`, OpenAI-compatible (plain JSON or `stream: true` as SSE)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from juru.hosted.chat import sse_lines
from juru.http.deps import Account, Chat, Context, current_account
from juru.http.hosted.chat_schemas import STREAM_DESCRIPTION, ChatCompletionOut
from juru.http.limits import check_input_size
from juru.http.openapi import ADMISSION_ERRORS, errors

router = APIRouter(
    prefix="/v1",
    tags=["chat completions"],
    dependencies=[Depends(current_account)],
    responses=ADMISSION_ERRORS,
)
# One event of the stream (Open API 3.1: an event stream's `schema` describes each event).
STREAM_EVENT = {
    "description": STREAM_DESCRIPTION,
    "anyOf": [
        {"type": "object", "required": ["data"], "properties": {"data": {"const": "[DONE]"}}},
        {
            "type": "object",
            "required": ["data"],
            "properties": {
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": {
                        "anyOf": [
                            {"$ref": "#/components/schemas/ChatCompletionChunk"},
                            {"$ref": "#/components/schemas/ErrorEnvelope"},
                        ]
                    },
                }
            },
        },
    ],
}
ANSWER = {
    "model": ChatCompletionOut,
    "description": "A `chat.completion`, or with `stream: true` a stream of chunks.",
    "content": {"text/event-stream": {"schema": STREAM_EVENT}},
}


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    include_usage: bool = False


class ChatCompletionIn(BaseModel):
    """The fields Juru passes on; unknown ones are refused rather than silently dropped."""

    # Strict: `0` is no boolean and `"5"` no number (what the description says is what passes).
    model_config = ConfigDict(extra="forbid", strict=True)

    model: str = Field(
        min_length=1, description="A catalog id, e.g. `openai/gpt-4o`.", examples=["juru/demo"]
    )
    messages: list[dict[str, Any]] = Field(
        min_length=1, examples=[[{"role": "user", "content": "What is the weather in Jakarta?"}]]
    )
    tools: list[dict[str, Any]] | None = Field(default=None, max_length=128)
    tool_choice: Literal["none", "auto", "required"] | dict[str, Any] | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: Literal[1] | None = None
    user: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None

    def request(self) -> dict[str, Any]:
        body = self.model_dump(exclude_none=True)
        if "max_completion_tokens" in body:
            body["max_tokens"] = body.pop("max_completion_tokens")
        return body


@router.post(
    "/chat/completions",
    response_model=None,
    responses={200: ANSWER, **errors(400, 402, 404, 413, 502)},
)
async def chat_completions(
    body: ChatCompletionIn, account: Account, chat: Chat, context: Context
) -> Response:
    """One model call in OpenAI's format, billed to the account with source `chat`."""
    check_input_size(body.messages, context.settings, "messages")
    prepared = await chat.prepare(account, body.request())
    if body.stream:
        chunks = await chat.start_stream(prepared)
        return StreamingResponse(sse_lines(chunks), media_type="text/event-stream")
    return JSONResponse(await chat.complete(prepared))
