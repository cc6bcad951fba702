"""Queries on `thread_messages`: each thread's transcript, with the run behind every message."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from juru.store.database import Database, dialect_insert
from juru.store.pages import Page
from juru.store.records import TranscriptMessage
from juru.store.run_log import append_events, message_events
from juru.store.tables import runs, thread_messages
from juru.store.transactions import write

TRANSCRIPT_FIELDS = ("message_id", "role", "content", "tool_calls", "tool_call_id", "name")


@functools.cache
def transcript_upsert(dialect: str) -> Any:
    """Append a message at the end of its thread; an id already there is updated in place.
    Built once per dialect: it runs in every step's write."""
    next_position = (
        select(func.coalesce(func.max(thread_messages.c.position), -1) + 1)
        .where(thread_messages.c.thread_id == bindparam("of_thread"))
        .scalar_subquery()
    )
    statement = dialect_insert(dialect, thread_messages).values(position=next_position)
    return statement.on_conflict_do_update(
        index_elements=[thread_messages.c.thread_id, thread_messages.c.message_id],
        set_={name: statement.excluded[name] for name in ("content", "tool_calls")},
    )


def append_transcript(
    connection: Connection,
    thread_id: str,
    run_id: str | None,
    messages: Sequence[dict[str, Any]],
    now: datetime,
) -> None:
    """Append `messages` in order, in one statement (one execution per row, in order)."""
    if not messages:
        return
    rows = [
        {
            "thread_id": thread_id,
            "of_thread": thread_id,
            "run_id": run_id,
            "created_at": now,
            **{name: message.get(name) for name in TRANSCRIPT_FIELDS},
        }
        for message in messages
    ]
    connection.execute(transcript_upsert(connection.dialect.name), rows)


async def append_run_messages(
    engine: Database,
    thread_id: str,
    run_id: str,
    messages: Sequence[dict[str, Any]],
    now: datetime,
) -> None:
    """Append a run's messages in order, with their events, in a transaction of their own."""
    if not messages:
        return

    def append(connection: Connection) -> None:
        # Writers of a run's events hold its row first (their ids are counted in order).
        connection.execute(select(runs.c.id).where(runs.c.id == run_id).with_for_update())
        append_transcript(connection, thread_id, run_id, messages, now)
        append_events(connection, run_id, message_events(thread_id, run_id, messages, now), now)

    await write(engine, append)


async def list_messages(
    engine: Database, thread_id: str, limit: int, after: int | None
) -> Page[TranscriptMessage]:
    """Messages in the order they were said, after position `after`."""
    query = select(thread_messages).where(thread_messages.c.thread_id == thread_id)
    if after is not None:
        query = query.where(thread_messages.c.position > after)
    query = query.order_by(thread_messages.c.position).limit(limit + 1)
    rows = await engine.rows(query)
    items = [TranscriptMessage.from_row(row) for row in rows[:limit]]
    return Page(items, has_more=len(rows) > limit)


async def position_of(engine: Database, thread_id: str, message_id: str) -> int | None:
    position = await engine.scalar(
        select(thread_messages.c.position).where(
            thread_messages.c.thread_id == thread_id,
            thread_messages.c.message_id == message_id,
        )
    )
    return None if position is None else int(position)
