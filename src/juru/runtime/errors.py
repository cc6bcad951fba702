"""Errors of the Agent Runtime contract; each answers `{"error": message}` with its status."""

from __future__ import annotations


class RuntimeCallError(Exception):
    """A class-method call that cannot be carried out; `status` is its HTTP status."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class RuntimeInputError(RuntimeCallError):
    """Unknown class method, or missing or wrong input for it."""

    status = 400


class SessionNotFoundError(RuntimeCallError):
    """No session with that id for that user (another user's session is not found either)."""

    status = 404


class SessionTakenError(RuntimeCallError):
    """A session id chosen by the caller is already in use."""

    status = 409


class AgentUnavailableError(RuntimeCallError):
    """The served agent cannot run (missing hosted agent, client tools, no provider key)."""

    status = 503


class AgentFailedError(RuntimeCallError):
    """The agent failed, or paused for a decision the contract cannot carry."""

    status = 500
