"""Checkpoint housekeeping: keep a thread's latest checkpoint, delete a thread's state."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from juru.store.checkpointer import ThreadedSqliteSaver


async def prune_checkpoints(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> None:
    """Drop every checkpoint of the thread but the latest (per namespace), with their writes.

    The conversation lives in the latest checkpoint, so storage grows with the conversation,
    not with the number of steps it took.
    """
    if isinstance(checkpointer, ThreadedSqliteSaver):
        await checkpointer.keep_latest(thread_id)
        return
    await checkpointer.aprune([thread_id], strategy="keep_latest")


async def count_checkpoints(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> int:
    config: Any = {"configurable": {"thread_id": thread_id}}
    return len([item async for item in checkpointer.alist(config)])
