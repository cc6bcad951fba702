"""The errors the client raises: the API's refusals carry its status, `code`, message and the
fields it names; transport failures are `APIConnectionError`."""

from __future__ import annotations

from typing import Any

import httpx


class JuruError(Exception):
    """Anything the client raises on purpose."""


class APIConnectionError(JuruError):
    """The server could not be reached, or the connection broke before an answer."""


class UnknownToolError(JuruError):
    """A run asked for a tool that `run_until_done` was given no function for."""

    def __init__(self, names: list[str], known: list[str], run_id: str) -> None:
        self.names = names
        self.run_id = run_id
        super().__init__(
            f"run {run_id} asks for {', '.join(names)}, which tools= does not have "
            f"(it has: {', '.join(known) or 'nothing'}); the run still waits for its outputs"
        )


class APIStatusError(JuruError):
    """The API refused a request: `status`, `code` (as in the error envelope), `message`,
    `fields` (`path: reason` for each field it names) and the response."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        fields: list[str] | None = None,
        response: httpx.Response | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields or []
        self.response = response
        super().__init__(f"{status} {code}: {message}")


class InvalidRequestError(APIStatusError):
    """400: the request is not valid (see `fields`)."""


class AuthenticationError(APIStatusError):
    """401: no key, or not a live key."""


class InsufficientBalanceError(APIStatusError):
    """402: the account's available balance does not cover the call."""


class NotFoundError(APIStatusError):
    """404: no such object for this account."""


class ConflictError(APIStatusError):
    """409: the object is not in a state that allows this (a busy thread, a finished run)."""


class GoneError(APIStatusError):
    """410: the run's events were pruned."""


class RequestTooLargeError(APIStatusError):
    """413: the body is over the server's limit."""


class UnprocessableError(APIStatusError):
    """422: understood but refused (an Idempotency-Key reused with another body)."""


class RateLimitError(APIStatusError):
    """429: the account's rate limit; `retry_after` is the server's advice in seconds."""

    def __init__(self, *args: Any, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.retry_after = retry_after


class ServerError(APIStatusError):
    """5xx: the server or its provider failed (503: the database does not answer)."""


ERROR_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: InvalidRequestError,
    401: AuthenticationError,
    402: InsufficientBalanceError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    413: RequestTooLargeError,
    422: UnprocessableError,
    429: RateLimitError,
}


def error_from_response(response: httpx.Response) -> APIStatusError:
    """The exception for a refused request, from the `/v1` error envelope when there is one."""
    code, message, fields = f"http_{response.status_code}", response.reason_phrase, []
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        code = str(error.get("code", code))
        message = str(error.get("message", message))
        fields = [f"{f.get('path')}: {f.get('reason')}" for f in error.get("fields") or []]
    elif isinstance(body, dict) and isinstance(body.get("detail"), str):
        message = body["detail"]
    kind = ERROR_BY_STATUS.get(response.status_code)
    if kind is None:
        kind = ServerError if response.status_code >= 500 else APIStatusError
    if kind is RateLimitError:
        return RateLimitError(
            response.status_code,
            code,
            message,
            fields,
            response,
            retry_after=retry_after_seconds(response),
        )
    return kind(response.status_code, code, message, fields, response)


def retry_after_seconds(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None
