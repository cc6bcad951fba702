"""The run state machine (section 5 of the hosted-agents document), as data.

queued → running ⇄ requires_action → succeeded; every non-terminal status may also end in
failed, expired (only from requires_action) or cancelled.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    REQUIRES_ACTION = "requires_action"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL


class FailureReason(StrEnum):
    """The `error` of a failed run, other than a model's own failure message."""

    STEP_LIMIT = "step_limit"
    TIMEOUT = "timeout"
    LOOP = "loop"
    INSUFFICIENT_BALANCE = "insufficient_balance"


TERMINAL = frozenset(
    {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.EXPIRED, RunStatus.CANCELLED}
)
ACTIVE = frozenset({RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.REQUIRES_ACTION})

TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.QUEUED: frozenset({RunStatus.RUNNING, RunStatus.FAILED, RunStatus.CANCELLED}),
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.REQUIRES_ACTION,
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.CANCELLED,
        }
    ),
    RunStatus.REQUIRES_ACTION: frozenset(
        {RunStatus.RUNNING, RunStatus.FAILED, RunStatus.EXPIRED, RunStatus.CANCELLED}
    ),
    RunStatus.SUCCEEDED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.EXPIRED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}


class IllegalTransitionError(ValueError):
    """The state machine has no such edge."""


def check_transition(source: RunStatus, target: RunStatus) -> None:
    if target not in TRANSITIONS[source]:
        raise IllegalTransitionError(f"a run cannot go from {source} to {target}")
