"""Following a run's event stream: the last durable id seen, when the run has ended, and when a
dropped stream is opened again (tenacity), for the sync and async clients alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import ServerSentEvent
from tenacity import RetryCallState, retry_if_exception_type, wait_exponential_jitter

from juru.client.errors import APIConnectionError
from juru.client.models import RunEvent, parse_event


class StreamClosedEarly(APIConnectionError):
    """The server closed a run's stream before the run ended (a restart, a proxy)."""


@dataclass
class StreamProgress:
    """Where a follower is: the id of the last durable event, whether the run has ended, and
    how many times in a row opening the stream has failed since the last event."""

    last_id: int | None = None
    ended: bool = False
    failures: int = 0

    def headers(self) -> dict[str, str]:
        return {"Last-Event-ID": str(self.last_id)} if self.last_id is not None else {}

    def closed_early(self) -> None:
        if not self.ended:
            raise StreamClosedEarly("the server closed the run's stream before the run ended")


def event_of(sse: ServerSentEvent, progress: StreamProgress) -> RunEvent:
    """The typed event; a durable one moves `progress` on (httpx-sse repeats the last id on
    events that carry none, so deltas are told apart by their type)."""
    event = parse_event(sse.event, sse.id, sse.data)
    if event.id is not None:
        progress.last_id, progress.failures = event.id, 0
    if event.run is not None and event.run.is_terminal:
        progress.ended = True
    return event


def is_event_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.startswith("text/event-stream")


def reconnect_policy(progress: StreamProgress, max_retries: int) -> dict[str, Any]:
    """tenacity's options for a stream: open it again after a dropped connection or an early
    close, up to `max_retries` times in a row without a new event."""

    def give_up(state: RetryCallState) -> bool:
        progress.failures += 1
        return progress.failures > max_retries

    return {
        "retry": retry_if_exception_type(APIConnectionError),
        "stop": give_up,
        "wait": wait_exponential_jitter(multiplier=0.2, max=5),
        "reraise": True,
    }
