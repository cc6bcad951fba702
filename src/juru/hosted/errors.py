"""Errors of the `/v1` API: a status, a snake_case code and a human message."""

from __future__ import annotations


class ApiError(Exception):
    """Rendered as `{"error": {"code": ..., "message": ...}}` with `status`."""

    def __init__(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def not_found(kind: str, object_id: str) -> ApiError:
    return ApiError(404, "not_found", f"no {kind} with id {object_id!r}")


def invalid(message: str, code: str = "invalid_request") -> ApiError:
    return ApiError(400, code, message)
