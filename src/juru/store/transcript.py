"""Queries on `thread_messages`: each thread's transcript, with the run behind every message."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from juru.store.pages import Page
from juru.store.records import TranscriptMessage
from juru.store.tables import thread_messages
from juru.store.transactions import write


async def append_messages(
    engine: AsyncEngine,
    thread_id: str,
    run_id: str | None,
    messages: Sequence[dict[str, Any]],
    now: datetime,
) -> None:
    """Append messages in order; a message id already in the thread is skipped, not repeated."""
    if not messages:
        return
    insert = sqlite_insert if engine.dialect.name == "sqlite" else postgresql_insert

    async def append(connection: AsyncConnection) -> None:
        last = await connection.scalar(
            select(func.max(thread_messages.c.position)).where(
                thread_messages.c.thread_id == thread_id
            )
        )
        known = set(
            (
                await connection.execute(
                    select(thread_messages.c.message_id).where(
                        thread_messages.c.thread_id == thread_id,
                        thread_messages.c.message_id.in_([m["message_id"] for m in messages]),
                    )
                )
            ).scalars()
        )
        position = -1 if last is None else int(last)
        for message in messages:
            if message["message_id"] in known:
                continue
            known.add(message["message_id"])
            position += 1
            await connection.execute(
                insert(thread_messages)
                .values(
                    thread_id=thread_id, position=position, run_id=run_id, created_at=now, **message
                )
                .on_conflict_do_nothing()
            )

    await write(engine, append)


async def list_messages(
    engine: AsyncEngine, thread_id: str, limit: int, after: int | None
) -> Page[TranscriptMessage]:
    """Messages in the order they were said, after position `after`."""
    query = select(thread_messages).where(thread_messages.c.thread_id == thread_id)
    if after is not None:
        query = query.where(thread_messages.c.position > after)
    query = query.order_by(thread_messages.c.position).limit(limit + 1)
    async with engine.connect() as connection:
        rows = (await connection.execute(query)).all()
    items = [TranscriptMessage.from_row(row._mapping) for row in rows[:limit]]
    return Page(items, has_more=len(rows) > limit)


async def position_of(engine: AsyncEngine, thread_id: str, message_id: str) -> int | None:
    async with engine.connect() as connection:
        position = await connection.scalar(
            select(thread_messages.c.position).where(
                thread_messages.c.thread_id == thread_id,
                thread_messages.c.message_id == message_id,
            )
        )
    return None if position is None else int(position)
