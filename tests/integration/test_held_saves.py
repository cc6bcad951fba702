"""`holding_saves()`: the saver's writes of one thread wait for the caller's next write and
commit in its transaction, or not at all; a read of the thread never misses them."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from sqlalchemy import Connection

from juru.store.checkpointer import CheckpointSaves, holding_saves, write_saves
from juru.store.database import Database
from juru.store.transactions import write
from tests.support.savers import savers

__all__ = ["savers"]  # a pytest fixture: the tests ask for it by name

THREAD: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
OTHER_THREAD: Any = {"configurable": {"thread_id": "u", "checkpoint_ns": ""}}


class Refused(Exception):
    """Raised by a write after the saves went in: its transaction is rolled back."""


async def save(saver: BaseCheckpointSaver[Any], step: int, thread: Any = THREAD) -> str:
    checkpoint = empty_checkpoint()
    config = await saver.aput(thread, checkpoint, {"source": "loop", "step": step}, {})
    assert config["configurable"]["checkpoint_id"] == checkpoint["id"]
    return str(checkpoint["id"])


async def latest(saver: BaseCheckpointSaver[Any], thread: Any = THREAD) -> tuple[str, list[Any]]:
    """Elsewhere: the thread's latest checkpoint id and its pending writes."""

    async def read() -> tuple[str, list[Any]]:
        found = await saver.aget_tuple(thread)
        assert found is not None
        return str(found.config["configurable"]["checkpoint_id"]), list(found.pending_writes or [])

    return await asyncio.create_task(read(), context=contextvars.Context())


async def write_with(
    store_database: Database, saves: CheckpointSaves, *, then_refuse: bool = False
) -> None:
    """A store write that makes `saves` in its transaction (and then raises, if asked)."""

    def work(connection: Connection) -> None:
        write_saves(connection, saves)
        if then_refuse:
            raise Refused

    await write(store_database, work)


async def test_held_saves_commit_with_the_callers_write(
    savers: tuple[Any, Any], store_database: Database
) -> None:
    ours, theirs = savers
    first = await save(ours, 1)
    async with holding_saves("t") as held:
        second = await save(ours, 2)
        config = {"configurable": {**THREAD["configurable"], "checkpoint_id": second}}
        await ours.aput_writes(config, [("__interrupt__", "paused")], "task-1")
        assert await latest(theirs) == (first, [])
        saves = held.take()
        assert saves is not None and [call.method for call in saves.calls] == ["put", "put_writes"]
        assert held.take() is None
        await write_with(store_database, saves)
    assert await latest(theirs) == (second, [("task-1", "__interrupt__", "paused")])


async def test_a_write_that_fails_takes_the_held_saves_with_it(
    savers: tuple[Any, Any], store_database: Database
) -> None:
    ours, theirs = savers
    first = await save(ours, 1)
    async with holding_saves("t") as held:
        await save(ours, 2)
        saves = held.take()
        assert saves is not None
        with pytest.raises(Refused):
            await write_with(store_database, saves, then_refuse=True)
    assert await latest(theirs) == (first, [])


async def test_a_read_of_the_thread_writes_what_is_held_first(savers: tuple[Any, Any]) -> None:
    ours, theirs = savers
    await save(ours, 1)
    async with holding_saves("t") as held:
        second = await save(ours, 2)
        found = await ours.aget_tuple(THREAD)
        assert found.config["configurable"]["checkpoint_id"] == second
        assert await latest(theirs) == (second, [])
        assert held.take() is None


async def test_a_listing_of_the_thread_writes_what_is_held_first(
    savers: tuple[Any, Any],
) -> None:
    ours, theirs = savers
    first = await save(ours, 1)
    async with holding_saves("t"):
        second = await save(ours, 2)
        listed = [item.config["configurable"]["checkpoint_id"] async for item in ours.alist(THREAD)]
        assert listed == [second, first]
        assert await latest(theirs) == (second, [])


async def test_only_the_named_thread_is_held(savers: tuple[Any, Any]) -> None:
    ours, theirs = savers
    async with holding_saves("t"):
        other = await save(ours, 1, OTHER_THREAD)
        assert await latest(theirs, OTHER_THREAD) == (other, [])


async def test_the_block_writes_what_is_left_when_it_ends(savers: tuple[Any, Any]) -> None:
    ours, theirs = savers
    first = await save(ours, 1)
    async with holding_saves("t"):
        second = await save(ours, 2)
        assert await latest(theirs) == (first, [])
    assert await latest(theirs) == (second, [])


async def test_a_block_that_raises_drops_what_it_held(savers: tuple[Any, Any]) -> None:
    ours, theirs = savers
    first = await save(ours, 1)
    with pytest.raises(Refused):
        async with holding_saves("t"):
            await save(ours, 2)
            raise Refused
    assert await latest(theirs) == (first, [])
