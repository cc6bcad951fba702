"""Domain errors: what went wrong, as a snake_case code and a message for the caller.

Services raise these; they know nothing of HTTP. `juru.http.errors` is the one place that maps
each kind to a status code, headers and a body.
"""

from __future__ import annotations

from typing import ClassVar


class DomainError(Exception):
    """A refusal the caller can act on."""

    default_code: ClassVar[str] = "invalid_request"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code or self.default_code


class InvalidRequestError(DomainError):
    """The request itself is wrong (shape, values, references)."""


class InvalidFieldError(InvalidRequestError):
    """One field of the request is wrong: where (a dotted path, `mcp_servers.0.url`) and why."""

    def __init__(self, path: str, reason: str, code: str | None = None) -> None:
        super().__init__(f"{path}: {reason}", code)
        self.path = path
        self.reason = reason


class AuthenticationError(DomainError):
    """No usable API key."""

    default_code = "invalid_api_key"


class InsufficientBalanceError(DomainError):
    """The account's balance is used up; top it up to make paid calls."""

    default_code = "insufficient_balance"


class NotFoundError(DomainError):
    """No such object for this caller (another account's objects are not found either)."""

    default_code = "not_found"


class ConflictError(DomainError):
    """The object is not in a state that allows the request."""

    default_code = "conflict"


class GoneError(DomainError):
    """The object exists but what was asked of it is no longer kept (a run's pruned events)."""

    default_code = "gone"


class TooLargeError(DomainError):
    """The request or an uploaded file is larger than allowed."""

    default_code = "too_large"


class UnsupportedMediaError(DomainError):
    """An uploaded file of a kind that is not accepted."""

    default_code = "unsupported_media_type"


class UnprocessableError(DomainError):
    """A well-formed request that contradicts an earlier one (an idempotency key reused with
    another body)."""

    default_code = "unprocessable"


class RateLimitedError(DomainError):
    """Too many requests in the account's window of `limit`; room again in `reset_seconds`."""

    default_code = "rate_limit_exceeded"

    def __init__(self, message: str, limit: int, reset_seconds: int) -> None:
        super().__init__(message)
        self.limit = limit
        self.reset_seconds = reset_seconds


class FailedError(DomainError):
    """The work was accepted and then failed on the server's side."""

    default_code = "internal_error"


class UpstreamError(DomainError):
    """A model provider failed."""

    default_code = "upstream_error"


class UnavailableError(DomainError):
    """Something the request needs is not available now (a provider key, the database)."""

    default_code = "unavailable"


def not_found(kind: str, object_id: str) -> NotFoundError:
    return NotFoundError(f"no {kind} with id {object_id!r}")


def invalid(message: str, code: str = "invalid_request") -> InvalidRequestError:
    return InvalidRequestError(message, code)
