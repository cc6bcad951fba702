"""Write transactions that a cancelled caller cannot cut in half.

Workers cancel a run's task to stop a model call at once (cancel, timeout, lost lease). A
transaction interrupted between its statement and its COMMIT would leave the connection holding
locks, so every write runs in a task of its own that finishes even when its caller is cancelled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

T = TypeVar("T")


async def write(engine: AsyncEngine, work: Callable[[AsyncConnection], Awaitable[T]]) -> T:
    """Run `work` in one transaction, to its COMMIT or ROLLBACK, whatever happens to the caller."""

    async def transaction() -> T:
        async with engine.begin() as connection:
            return await work(connection)

    return await asyncio.shield(asyncio.ensure_future(transaction()))
