"""The kinds of event a run's stream carries (`GET /v1/runs/:id/events`).

Durable events are stored in the run's log, numbered 1, 2, 3, ... with no gaps; ephemeral ones
are only sent to whoever is listening at the time, and carry no id.
"""

from __future__ import annotations

from enum import StrEnum


class RunEventType(StrEnum):
    STATUS = "run.status"
    MESSAGE_COMPLETED = "message.completed"
    STEP_COMPLETED = "step.completed"
    # Ephemeral: a piece of a model's text, as it arrives.
    MESSAGE_DELTA = "message.delta"
