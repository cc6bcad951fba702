"""Write transactions that a cancelled caller cannot cut in half.

Workers cancel a run's task to stop a model call at once (cancel, timeout, lost lease). A
transaction interrupted between its statement and its COMMIT would leave the connection holding
locks, so every write runs in a task of its own that finishes even when its caller is cancelled.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

T = TypeVar("T")
# Transactions in progress, per engine: shutdown waits for those its cancelled callers left.
_in_flight: weakref.WeakKeyDictionary[AsyncEngine, set[asyncio.Future[Any]]] = (
    weakref.WeakKeyDictionary()
)


async def write(engine: AsyncEngine, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    """Run `work` in one transaction, to its COMMIT or ROLLBACK, whatever happens to the caller."""

    async def transaction() -> T:
        async with engine.begin() as connection:
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
