"""The body of every `/v1` error: `{"error": {"code", "message", "fields"?}}`."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FieldError(BaseModel):
    """One refused part of a request."""

    path: str = Field(description="Where in the request, e.g. `tools.0.function.name`.")
    reason: str = Field(description="Why it was refused.")


class ErrorDetail(BaseModel):
    """What went wrong; some errors carry more keys than these."""

    model_config = ConfigDict(extra="allow")

    code: str = Field(description="A stable snake_case code, e.g. `thread_busy`.")
    message: str = Field(description="A human-readable explanation.")
    fields: list[FieldError] | None = None


class ErrorEnvelope(BaseModel):
    error: ErrorDetail
