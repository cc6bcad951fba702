"""Errors of the Agent Runtime contract; each answers `{"error": message}`, with the status
that `juru.http.errors` gives its domain kind."""

from __future__ import annotations

from juru.core import errors


class RuntimeCallError(errors.DomainError):
    """A class-method call that cannot be carried out."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class RuntimeInputError(RuntimeCallError, errors.InvalidRequestError):
    """Unknown class method, or missing or wrong input for it."""


class SessionNotFoundError(RuntimeCallError, errors.NotFoundError):
    """No session with that id for that user (another user's session is not found either)."""


class SessionTakenError(RuntimeCallError, errors.ConflictError):
    """A session id chosen by the caller is already in use."""


class AgentUnavailableError(RuntimeCallError, errors.UnavailableError):
    """The served agent cannot run (missing hosted agent, client tools, no provider key)."""


class AgentFailedError(RuntimeCallError, errors.FailedError):
    """The agent failed."""


class ReviewNotPendingError(RuntimeCallError, errors.ConflictError):
    """Decisions were sent to a session that is not waiting for a review."""


class RuntimeUnauthenticatedError(RuntimeCallError, errors.AuthenticationError):
    """`JURU_RUNTIME_TOKEN` is set and the call does not carry it as a Bearer token."""
