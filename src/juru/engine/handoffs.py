"""The runs handed to one worker by the writes that resumed them, until it takes them up.

The write that resumes a run with its tool outputs leases it to the worker that paused it, for
a short lease, and its notice (`engine.events.handed_to`) carries the run as the write left it
when it fits. The worker starts such a run without reading it, as a claim would have found it
at that commit, provided nothing changed it since: a notice that the run changed (a
cancellation, a lease taken over) makes the worker read it instead, and so does the lapse of
the hand-off's lease, after which another worker may have claimed it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from juru.store.records import RunRecord
from juru.store.run_state import run_from_handed_state


@dataclass(frozen=True)
class TakenUp:
    """What a worker takes up: the runs to start as their notices carried them, and the ids
    of the others, to read."""

    carried: list[RunRecord]
    to_read: list[str]


@dataclass
class HandedRuns:
    """The runs handed to a worker, in the order they came, not yet taken up (each as its
    notice carried it, or None: to be read), and what wakes the worker for them. What
    `RunEvents.serve_work` gives the runs handed to the worker and the changes of runs."""

    waiting: list[tuple[str, RunRecord | None]] = field(default_factory=list)
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def __bool__(self) -> bool:
        return bool(self.waiting)

    def hand(self, run_id: str, carried: dict[str, Any] | None) -> None:
        """`run_id` was handed to the worker; `carried`, the run as its notice carried it (JSON
        values, `store.run_state.handed_run_state`) or None."""
        run = None if carried is None else run_from_handed_state(carried)
        self.waiting.append((run_id, run if run is not None and run.id == run_id else None))
        self.wake.set()

    def changed(self, run_id: str) -> None:
        """The run changed (its status or its lease) since it may have been handed over: if it
        waits here, it is read rather than started as its notice carried it."""
        for index, (waiting_id, run) in enumerate(self.waiting):
            if waiting_id == run_id and run is not None:
                self.waiting[index] = (run_id, None)

    def take(self, room: int, now: datetime) -> TakenUp:
        """The first `room` runs waiting, no longer waiting: a carried run whose hand-off's
        lease lasts at `now` to start, the others to read."""
        taken, self.waiting = self.waiting[:room], self.waiting[room:]
        carried: list[RunRecord] = []
        to_read: list[str] = []
        for run_id, run in taken:
            if run is not None and run.lease_expires_at is not None and now < run.lease_expires_at:
                carried.append(run)
            else:
                to_read.append(run_id)
        return TakenUp(carried, to_read)
