"""Checkpoint housekeeping: keep a thread's latest checkpoint, delete a thread's state.

The conversation lives in a thread's latest checkpoint, so the older ones (and their pending
writes, and on PostgreSQL the channel values only they refer to) can go: storage grows with the
conversation, not with the number of steps it took. A hosted run drops them inside the write
that pauses or ends it (`keep_latest_checkpoints`), with no transaction of its own; the Agent
Runtime's sessions after each turn (`prune_checkpoints`). The SQL is on the tables of
LangGraph's savers (on the same database as Juru's).
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from sqlalchemy import Connection

from juru.store.database import Database
from juru.store.joined import JoinedSql, Part, write_parts
from juru.store.transactions import write

# LangGraph's PostgreSQL saver also keeps channel values in `checkpoint_blobs`, by channel and
# version: a blob stays while the checkpoint left refers to it. A part of a joined statement
# (`store.joined`; its entries see one snapshot, so the blobs kept are those the latest
# checkpoints refer to), not three statements: the step's write that runs it is on the step
# path.
KEEP_LATEST = JoinedSql(
    frozenset({"checkpoints", "checkpoint_writes", "checkpoint_blobs"}),
    (
        """prune_latest AS (
            SELECT checkpoint_ns, MAX(checkpoint_id) AS checkpoint_id FROM checkpoints
            WHERE thread_id = CAST(:prune_thread AS text) GROUP BY checkpoint_ns
        )""",
        """prune_writes AS (
            DELETE FROM checkpoint_writes
            WHERE thread_id = CAST(:prune_thread AS text) AND checkpoint_id <> (
                SELECT prune_latest.checkpoint_id FROM prune_latest
                WHERE prune_latest.checkpoint_ns = checkpoint_writes.checkpoint_ns
            )
        )""",
        """prune_checkpoints AS (
            DELETE FROM checkpoints
            WHERE thread_id = CAST(:prune_thread AS text) AND checkpoint_id <> (
                SELECT prune_latest.checkpoint_id FROM prune_latest
                WHERE prune_latest.checkpoint_ns = checkpoints.checkpoint_ns
            )
        )""",
        """prune_blobs AS (
            DELETE FROM checkpoint_blobs
            WHERE thread_id = CAST(:prune_thread AS text) AND NOT EXISTS (
                SELECT 1 FROM checkpoints AS kept JOIN prune_latest
                    ON prune_latest.checkpoint_ns = kept.checkpoint_ns
                    AND prune_latest.checkpoint_id = kept.checkpoint_id
                WHERE kept.thread_id = CAST(:prune_thread AS text)
                    AND kept.checkpoint_ns = checkpoint_blobs.checkpoint_ns
                    AND kept.checkpoint -> 'channel_versions' ->> checkpoint_blobs.channel
                        = checkpoint_blobs.version
            )
        )""",
    ),
    # LangGraph's SQLite saver: `checkpoints` and their pending `writes`.
    kind="prune",
    sqlite=tuple(
        f"""DELETE FROM {table} WHERE thread_id = :prune_thread
        AND (checkpoint_ns, checkpoint_id) NOT IN (
            SELECT checkpoint_ns, MAX(checkpoint_id) FROM checkpoints
            WHERE thread_id = :prune_thread GROUP BY checkpoint_ns
        )"""
        for table in ("writes", "checkpoints")
    ),
    sqlite_tables=frozenset({"writes", "checkpoints"}),
)


def keep_latest_checkpoints(connection: Connection, thread_id: str) -> None:
    """Inside a write of Juru's: drop every checkpoint of the thread but the latest (per
    namespace), with their writes and the values only they referred to."""
    write_parts(connection, [keep_latest_part(thread_id)])


def keep_latest_part(thread_id: str) -> Part:
    """`keep_latest_checkpoints` as a part of a joined write (`store.joined`)."""

    return Part(KEEP_LATEST, {"prune_thread": thread_id})


async def prune_checkpoints(engine: Database, thread_id: str) -> None:
    """The same in a write of its own (after a runtime session's turn)."""
    await write(engine, lambda connection: keep_latest_checkpoints(connection, thread_id))


async def count_checkpoints(checkpointer: BaseCheckpointSaver[Any], thread_id: str) -> int:
    config: Any = {"configurable": {"thread_id": thread_id}}
    return len([item async for item in checkpointer.alist(config)])
