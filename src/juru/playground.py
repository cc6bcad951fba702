"""The playground service: run a named feature for one message, or resume it."""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from langgraph.pregel import Pregel
from langgraph.types import Durability

from juru import runner
from juru.agents.features import Feature
from juru.agents.registry import FeatureRegistry
from juru.review import InvalidReviewError
from juru.store.checkpointer import reading_once
from juru.store.database import Database
from juru.store.playground_threads import claim_playground_thread, playground_thread_feature

THREAD_PREFIX = "playground-"
CHECKPOINT_NAMESPACE = "playground:"


class FeatureNotFoundError(KeyError):
    """No feature has that name."""

    def __str__(self) -> str:
        return str(self.args[0])


class PlaygroundRequestError(ValueError):
    """The request cannot be carried out as asked (the 400s of the playground)."""


def new_thread_id() -> str:
    return f"{THREAD_PREFIX}{uuid.uuid4().hex[:12]}"


def checkpoint_thread(thread_id: str) -> str:
    """Playground threads keep their state apart from every other face's threads."""
    return f"{CHECKPOINT_NAMESPACE}{thread_id}"


class Playground:
    """Runs features for single messages; state lives in the checkpointer, per thread.

    A turn saves its thread's checkpoint when it answers, pauses or fails (`durability`
    "exit", the default), not after each of its steps too: the turn is one request, and a
    server that dies in the middle of one leaves the thread as the last turn left it.
    """

    def __init__(
        self,
        registry: FeatureRegistry,
        engine: Database,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        durability: Durability = "exit",
    ) -> None:
        self.registry = registry
        self.engine = engine
        self.clock = clock
        self.options = runner.RunOptions(durability=durability)
        self._thread_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    def _lock(self, thread_id: str) -> asyncio.Lock:
        # One turn at a time per thread in this process; idle locks are dropped with their users.
        lock = self._thread_locks.get(thread_id)
        if lock is None:
            lock = self._thread_locks[thread_id] = asyncio.Lock()
        return lock

    def features(self) -> list[Feature]:
        return list(self.registry.features)

    async def _agent(self, feature: str) -> Pregel[Any, Any, Any, Any]:
        try:
            self.registry.find(feature)
        except KeyError as error:
            raise FeatureNotFoundError(str(error.args[0])) from None
        return await self.registry.agent(feature)

    async def _check_thread(self, thread_id: str, feature: str, *, claim: bool) -> None:
        """`thread_id` is `feature`'s (claimed for it first when `claim`, for a new message)."""
        if claim:
            owner: str | None = await claim_playground_thread(
                self.engine, thread_id, feature, self.clock()
            )
        else:
            owner = await playground_thread_feature(self.engine, thread_id)
        if owner is not None and owner != feature:
            raise PlaygroundRequestError(
                f"thread {thread_id} belongs to feature {owner!r}, not {feature!r}"
            )

    async def send_message(
        self, feature: str, message: str, thread_id: str | None, max_steps: int
    ) -> runner.Turn:
        """Send `message` to `feature` on `thread_id` (a new thread when None or empty)."""
        agent = await self._agent(feature)
        _check_message(message)
        thread_id = thread_id or new_thread_id()
        async with self._lock(thread_id):
            await self._check_thread(thread_id, feature, claim=True)
            # The runner's look at the thread's state is the graph's first load too.
            with _refusals(thread_id), reading_once():
                turn = await runner.send_message(
                    agent, message, checkpoint_thread(thread_id), max_steps, self.options
                )
        turn.thread_id = thread_id
        return turn

    async def stream_message(
        self, feature: str, message: str, thread_id: str | None, max_steps: int
    ) -> AsyncIterator[TurnItem]:
        """`send_message` as it happens: each step as it finishes, the text models write as
        they write it, and the whole turn last. Refusals raise here, before the first item."""
        agent = await self._agent(feature)
        _check_message(message)
        thread_id = thread_id or new_thread_id()
        stream = runner.stream_message(
            agent, message, checkpoint_thread(thread_id), max_steps, self.options
        )
        return await _started(self._streamed_turn(feature, thread_id, stream, claim=True))

    async def stream_resume(
        self, feature: str, thread_id: str, value: Any, max_steps: int
    ) -> AsyncIterator[TurnItem]:
        """`resume` as it happens (see `stream_message`)."""
        agent = await self._agent(feature)
        stream = runner.stream_resume(
            agent, value, checkpoint_thread(thread_id), max_steps, self.options
        )
        return await _started(self._streamed_turn(feature, thread_id, stream, claim=False))

    async def _streamed_turn(
        self, feature: str, thread_id: str, stream: runner.TurnStream, *, claim: bool
    ) -> AsyncIterator[TurnItem | _Started]:
        async with self._lock(thread_id):
            await self._check_thread(thread_id, feature, claim=claim)
            with _refusals(thread_id):
                await stream.check_preconditions()
            yield _Started()
            async for item in stream.with_text():
                yield item
            stream.turn.thread_id = thread_id
            yield stream.turn

    async def resume(self, feature: str, thread_id: str, value: Any, max_steps: int) -> runner.Turn:
        """Resume a paused `thread_id` of `feature` with `value` (checked if it is a review)."""
        agent = await self._agent(feature)
        async with self._lock(thread_id):
            await self._check_thread(thread_id, feature, claim=False)
            with _refusals(thread_id), reading_once():
                turn = await runner.resume(
                    agent, value, checkpoint_thread(thread_id), max_steps, self.options
                )
        turn.thread_id = thread_id
        return turn


def _check_message(message: str) -> None:
    if not message.strip():
        raise PlaygroundRequestError("message must contain more than white space")


@contextmanager
def _refusals(thread_id: str) -> Iterator[None]:
    """The runner's refusals of a turn on `thread_id`, as the playground's 400s."""
    try:
        yield
    except runner.ThreadAwaitingReviewError:
        raise PlaygroundRequestError(
            f"thread {thread_id} is waiting for a review decision; "
            "answer it with POST /playground/resume first"
        ) from None
    except runner.NothingToResumeError:
        raise PlaygroundRequestError(f"thread {thread_id} is not waiting for a decision") from None
    except InvalidReviewError as error:
        raise PlaygroundRequestError(f"invalid review: {error}") from None


@dataclass(frozen=True)
class _Started:
    """A streamed turn passed its checks: what follows is the turn itself."""


TurnItem = runner.Step | runner.TextDelta | runner.Turn


async def _started(items: AsyncIterator[TurnItem | _Started]) -> AsyncIterator[TurnItem]:
    """Run a streamed turn up to its start, so that its refusals raise now (before a response
    has begun), and return the rest of it."""
    first = await anext(items)
    assert isinstance(first, _Started)
    return cast(AsyncIterator[TurnItem], items)
