"""Following a run: its durable events after a given id, then live ones, until it ends.

A follower holds no database connection while it waits: it reads the log (one short query)
only when the run's events say the log grew without carrying what it grew by, or carry events
that do not follow the last one it sent (it missed some); otherwise it sends what the notice
carried, text deltas (ephemeral, never read from the database) or its heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from juru.core.run_events import RunEventType
from juru.core.states import RunStatus
from juru.engine.events import RunEvents
from juru.store import run_log
from juru.store.database import Database
from juru.store.run_log import RunEventRecord

TERMINAL_VALUES = frozenset(status.value for status in RunStatus if status.is_terminal)


@dataclass(frozen=True)
class MessageDelta:
    """Ephemeral: a piece of the text of message `message_id`, as the model writes it."""

    message_id: str
    delta: str


@dataclass(frozen=True)
class StreamTicket:
    """A stream token (`core.keys.stream_token`) and where to use it."""

    token: str
    expires_at: datetime
    url: str


@dataclass(frozen=True)
class Heartbeat:
    """Nothing happened for a while; the stream says it is still open."""


StreamItem = RunEventRecord | MessageDelta | Heartbeat
StatusSeen = Callable[[RunEventRecord, dict[str, Any] | None], None]


def ends_the_run(event: RunEventRecord) -> bool:
    return event.type == RunEventType.STATUS and event.data.get("status") in TERMINAL_VALUES


async def follow_run(
    engine: Database,
    events: RunEvents,
    run_id: str,
    after: int,
    *,
    ended: bool,
    heartbeat_seconds: float,
    on_status: StatusSeen | None = None,
) -> AsyncGenerator[StreamItem, None]:
    """The run's events after id `after`, then each new one as it is committed, ending right
    after the event of a terminal status (or, for a run that had `ended` already, after the
    replay). Between them, text deltas as they arrive and a heartbeat when all is quiet.
    `on_status` is told of each `run.status` event sent, with the run as the last status
    notice heard since the stream opened carried it (or None)."""
    last = after
    completed: set[str] = set()
    page: list[RunEventRecord] = []
    event: RunEventRecord | None = None
    async with events.follow(run_id) as follower:
        while True:
            follower.wake.clear()
            for arrival in follower.take():
                if isinstance(arrival, dict):
                    message_id, text = arrival.get("message_id"), arrival.get("delta")
                    wellformed = isinstance(message_id, str) and isinstance(text, str)
                    if wellformed and message_id not in completed:
                        yield MessageDelta(str(message_id), str(text))
                    continue
                carried = arrival
                while True:
                    if carried is not None and carried[-1].seq <= last:
                        break  # a read sent them already
                    if carried is not None and carried[0].seq == last + 1:
                        page = carried  # as their write's notice carried them: no read
                    else:
                        page = await run_log.events_after(engine, run_id, last)
                    for event in page:
                        if on_status is not None and event.type == RunEventType.STATUS:
                            on_status(event, follower.state)
                        yield event
                        last = event.seq
                        if event.type == RunEventType.MESSAGE_COMPLETED:
                            # Later deltas of it (a slow stream) are dropped: it holds the text.
                            completed.add(str(event.data.get("message_id")))
                        if ends_the_run(event):
                            return
                        if _may_start_work(event):
                            # A worker may take the run up now: its calls should stream.
                            await events.announce_interest(run_id)
                    if page is carried or len(page) < run_log.PAGE:
                        break
                    carried = None
                # An idle stream keeps nothing it sent (a replayed page is kilobytes per stream).
                page, event = [], None
                if ended:
                    return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(follower.wake.wait(), heartbeat_seconds)
                continue
            yield Heartbeat()


def _may_start_work(event: RunEventRecord) -> bool:
    starting = (RunStatus.QUEUED.value, RunStatus.RUNNING.value)
    return event.type == RunEventType.STATUS and event.data.get("status") in starting
