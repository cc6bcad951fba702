"""The Agent Runtime contract: `/api/reasoning_engine` (unary) and
`/api/stream_reasoning_engine` (NDJSON), both with `{class_method, input}` bodies.

Mounted only when `JURU_RUNTIME_ENABLED` is on. By default the endpoints have no authentication
of their own (the platform in front of the container authenticates callers); with
`JURU_RUNTIME_TOKEN` set they require it as a Bearer token.
"""

from __future__ import annotations

import hmac
import json
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from juru.http.deps import Runtime, context_of
from juru.runtime.errors import RuntimeUnauthenticatedError
from juru.runtime.methods import STREAM_PATH, UNARY_PATH, Chunks, call_unary, open_stream

logger = logging.getLogger(__name__)


async def require_runtime_token(request: Request) -> None:
    """With `JURU_RUNTIME_TOKEN` set, refuse (401) a call without it as its Bearer token."""
    token = context_of(request).settings.runtime_token
    if token is None:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    expected = token.get_secret_value().encode()
    if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
        raise RuntimeUnauthenticatedError(
            "this Agent Runtime requires its token: send Authorization: Bearer <JURU_RUNTIME_TOKEN>"
        )


router = APIRouter(tags=["agent runtime"], dependencies=[Depends(require_runtime_token)])


class ReasoningEngineRequest(BaseModel):
    class_method: str = Field(description="The class method to call, e.g. query.")
    input: dict[str, Any] | None = Field(default=None, description="The method's arguments.")


def ndjson_line(value: Any) -> bytes:
    return (json.dumps(jsonable_encoder(value)) + "\n").encode()


async def ndjson(chunks: Chunks) -> AsyncIterator[bytes]:
    """One JSON object per line; an error after the first line is the stream's last line."""
    try:
        async for chunk in chunks:
            yield ndjson_line(chunk)
    except Exception as error:
        reference = uuid.uuid4().hex[:12]
        logger.exception("a runtime stream failed after it had started (ref %s)", reference)
        message = getattr(error, "message", None) or f"internal error (ref {reference})"
        yield ndjson_line({"error": message})
    finally:
        await chunks.aclose()


@router.post(UNARY_PATH)
async def reasoning_engine(body: ReasoningEngineRequest, runtime: Runtime) -> dict[str, Any]:
    """Call a unary class method (api_mode "" or "async"): `{"output": ...}`."""
    return {"output": await call_unary(runtime, body.class_method, body.input)}


@router.post(STREAM_PATH)
async def stream_reasoning_engine(
    body: ReasoningEngineRequest, runtime: Runtime
) -> StreamingResponse:
    """Call a streaming class method (api_mode "stream" or "async_stream"): NDJSON lines."""
    chunks = await open_stream(runtime, body.class_method, body.input)
    return StreamingResponse(ndjson(chunks), media_type="application/json")
