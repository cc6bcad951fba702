"""Checkpoint housekeeping: keep a thread's latest checkpoint, delete a thread's state."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

_SQLITE_LATEST = (
    "SELECT checkpoint_ns, MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ? "
    "GROUP BY checkpoint_ns"
)
_SQLITE_PRUNE = (
    f"DELETE FROM writes WHERE thread_id = ? AND (checkpoint_ns, checkpoint_id) NOT IN "
    f"({_SQLITE_LATEST})",
    f"DELETE FROM checkpoints WHERE thread_id = ? AND (checkpoint_ns, checkpoint_id) NOT IN "
    f"({_SQLITE_LATEST})",
)


async def prune_checkpoints(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> None:
    """Drop every checkpoint of the thread but the latest (per namespace), with their writes.

    The conversation lives in the latest checkpoint, so storage grows with the conversation,
    not with the number of steps it took.
    """
    if isinstance(checkpointer, AsyncSqliteSaver):
        async with checkpointer.lock:
            for statement in _SQLITE_PRUNE:
                await checkpointer.conn.execute(statement, (thread_id, thread_id))
            await checkpointer.conn.commit()
        return
    await checkpointer.aprune([thread_id], strategy="keep_latest")


async def count_checkpoints(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> int:
    config: Any = {"configurable": {"thread_id": thread_id}}
    return len([item async for item in checkpointer.alist(config)])
