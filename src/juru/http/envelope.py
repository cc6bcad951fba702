"""The error envelope every face answers with (except where its specification fixes another
shape: see `juru.http.errors`): `{"error": {"code", "message", "fields"?}}`.

The OpenAPI description declares these models; `juru.http.errors` builds every body from them.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from juru.core.text import public_message

__all__ = ["ErrorDetail", "ErrorEnvelope", "FieldError", "error_body", "public_message"]


class FieldError(BaseModel):
    """One field a request got wrong."""

    path: str = Field(
        description="Where the field is: a dotted path into the body (`tools.0."
        "function.name`), or `query.<name>`, `path.<name>`, `header.<name>`."
    )
    reason: str = Field(description="What is wrong with it, for a human.")


class ErrorDetail(BaseModel):
    """What went wrong: a stable snake_case `code` to branch on and a `message` to show."""

    model_config = ConfigDict(extra="allow")

    code: str = Field(description="Stable, snake_case, e.g. `invalid_request`, `not_found`.")
    message: str = Field(description="A sentence for a human; never a library's internals.")
    fields: list[FieldError] | None = Field(
        default=None, description="For shape errors (`invalid_request`): each field at fault."
    )


class ErrorEnvelope(BaseModel):
    """The body of every error answer of `/v1` (and of any route outside the three faces)."""

    error: ErrorDetail


def error_body(
    code: str, message: str, fields: list[FieldError] | None = None, **extra: Any
) -> dict[str, Any]:
    """The envelope as a JSON-ready dict (`fields` only when there are some)."""
    detail = ErrorDetail(code=code, message=message, fields=fields, **extra)
    return ErrorEnvelope(error=detail).model_dump(mode="json", exclude_none=True)
