"""`reading_once()`: a look at a thread's latest checkpoint and the read that follows it share
one trip to the database, and nothing the saver writes is ever hidden by it."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from juru.store.checkpointer import open_checkpointer, reading_once
from juru.store.urls import DatabaseUrl

THREAD: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


@pytest.fixture
async def savers(database_url: str) -> AsyncIterator[tuple[Any, Any]]:
    """Two savers on one database: the second writes behind the first's back."""
    url = DatabaseUrl.parse(database_url)
    async with open_checkpointer(url) as first, open_checkpointer(url) as second:
        yield first, second


async def save(saver: BaseCheckpointSaver[Any], step: int) -> str:
    checkpoint = empty_checkpoint()
    config = await saver.aput(THREAD, checkpoint, {"source": "loop", "step": step}, {})
    return str(config["configurable"]["checkpoint_id"])


async def latest_id(saver: BaseCheckpointSaver[Any]) -> str | None:
    found = await saver.aget_tuple(THREAD)
    return None if found is None else str(found.config["configurable"]["checkpoint_id"])


async def test_the_read_after_a_read_is_shared_once(savers: tuple[Any, Any]) -> None:
    ours, theirs = savers
    first = await save(ours, 1)
    with reading_once():
        assert await latest_id(ours) == first
        # Another process's write: outside this context, so nothing here can know of it.
        newer = await asyncio.create_task(save(theirs, 2), context=contextvars.Context())
        assert await latest_id(ours) == first  # the shared read
        assert await latest_id(ours) == newer  # shared once only, then the database again
    assert await latest_id(ours) == newer


async def test_a_write_of_the_saver_forgets_what_was_read(savers: tuple[Any, Any]) -> None:
    ours, _ = savers
    await save(ours, 1)
    with reading_once():
        await latest_id(ours)
        newer = await save(ours, 2)
        assert await latest_id(ours) == newer


async def test_outside_reading_once_every_read_goes_to_the_database(
    savers: tuple[Any, Any],
) -> None:
    ours, theirs = savers
    await save(ours, 1)
    await latest_id(ours)
    newer = await save(theirs, 2)
    assert await latest_id(ours) == newer
