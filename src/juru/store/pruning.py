"""Checkpoint housekeeping: keep a thread's latest checkpoint, delete a thread's state.

The conversation lives in a thread's latest checkpoint, so the older ones (and their pending
writes, and on PostgreSQL the channel values only they refer to) can go: storage grows with the
conversation, not with the number of steps it took. A hosted run drops them inside the write
that pauses or ends it (`keep_latest_checkpoints`), with no transaction of its own.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy import Connection, text

from juru.store.checkpointer import POSTGRES_KEEP_LATEST, SQLITE_KEEP_LATEST, ThreadedSqliteSaver

_KEEP_LATEST = {
    "sqlite": [text(statement) for statement in SQLITE_KEEP_LATEST],
    "postgresql": [text(statement) for statement in POSTGRES_KEEP_LATEST],
}


def keep_latest_checkpoints(connection: Connection, thread_id: str) -> None:
    """Inside a write of Juru's: drop every checkpoint of the thread but the latest (per
    namespace), with their writes and the values only they referred to."""
    for statement in _KEEP_LATEST[connection.dialect.name]:
        connection.execute(statement, {"thread": thread_id})


async def prune_checkpoints(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> None:
    """The same through the checkpointer, in a transaction of its own."""
    if isinstance(checkpointer, ThreadedSqliteSaver):
        await checkpointer.keep_latest(thread_id)
        return
    await checkpointer.aprune([thread_id], strategy="keep_latest")


async def count_checkpoints(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> int:
    config: Any = {"configurable": {"thread_id": thread_id}}
    return len([item async for item in checkpointer.alist(config)])
