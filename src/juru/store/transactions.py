"""Write transactions that a cancelled caller cannot cut in half.

Workers cancel a run's task to stop a model call at once (cancel, timeout, lost lease). A
transaction interrupted between its statement and its COMMIT would leave the connection holding
locks, so every write runs in a task of its own that finishes even when its caller is cancelled.

On SQLite an engine may have a write queue (`store.write_queue`): its writes then wait in the
queue and begin with `BEGIN IMMEDIATE`, so none of them meets SQLite's busy handler.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from juru.store.write_queue import SqliteWriteQueue

T = TypeVar("T")
# Transactions in progress, per engine: shutdown waits for those its cancelled callers left.
_in_flight: weakref.WeakKeyDictionary[AsyncEngine, set[asyncio.Future[Any]]] = (
    weakref.WeakKeyDictionary()
)
_queues: weakref.WeakKeyDictionary[AsyncEngine, SqliteWriteQueue] = weakref.WeakKeyDictionary()


def attach_write_queue(engine: AsyncEngine, queue: SqliteWriteQueue) -> None:
    """Make every `write` on `engine` wait in `queue` (SQLite engines, at creation)."""
    _queues[engine] = queue


def write_queue_of(engine: AsyncEngine) -> SqliteWriteQueue | None:
    return _queues.get(engine)


async def write(engine: AsyncEngine, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    """Run `work` in one transaction, to its COMMIT or ROLLBACK, whatever happens to the caller."""

    queue = _queues.get(engine)

    async def transaction() -> T:
        if queue is None:
            async with engine.begin() as connection:
                return await work(connection)
        async with queue.hold(), engine.begin() as connection:
            await connection.exec_driver_sql("BEGIN IMMEDIATE")
            return await work(connection)

    task = asyncio.ensure_future(transaction())
    in_flight = _in_flight.setdefault(engine, set())
    in_flight.add(task)
    task.add_done_callback(in_flight.discard)
    return await asyncio.shield(task)


async def wait_for_writes(engine: AsyncEngine, timeout: float = 10.0) -> None:
    """Let the engine's write transactions in progress finish (before it is disposed), but
    never wait longer than `timeout` seconds: shutting down must not hang."""
    in_flight = _in_flight.get(engine, set())
    if in_flight:
        await asyncio.wait(list(in_flight), timeout=timeout)
