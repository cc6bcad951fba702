"""Write transactions that a cancelled caller cannot cut in half.

Workers cancel a run's task to stop a model call at once (cancel, timeout, lost lease). A
transaction interrupted between its statement and its COMMIT would leave the connection holding
locks, so every write runs in a task of its own that finishes even when its caller is cancelled.

On SQLite a database has a write queue (`store.write_queue`): its writes then wait in the
queue and begin with `BEGIN IMMEDIATE`, so none of them meets SQLite's busy handler.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from juru.store.database import Database

T = TypeVar("T")


async def write(engine: Database, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    """Run `work` in one transaction, to its COMMIT or ROLLBACK, whatever happens to the caller."""
    queue = engine.write_queue

    async def transaction() -> T:
        if queue is None:
            async with engine.begin() as connection:
                return await work(connection)
        async with queue.hold(), engine.begin() as connection:
            await connection.exec_driver_sql("BEGIN IMMEDIATE")
            return await work(connection)

    task = asyncio.ensure_future(transaction())
    engine.writes_in_flight.add(task)
    task.add_done_callback(engine.writes_in_flight.discard)
    return await asyncio.shield(task)


async def wait_for_writes(engine: Database, timeout: float = 10.0) -> None:
    """Let the write transactions in progress finish (before the engine is disposed), but
    never wait longer than `timeout` seconds: shutting down must not hang."""
    if engine.writes_in_flight:
        await asyncio.wait(list(engine.writes_in_flight), timeout=timeout)
