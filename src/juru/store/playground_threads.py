"""Queries on `playground_threads`: which feature each playground thread belongs to."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select, update

from juru.store.database import Database, dialect_insert
from juru.store.tables import playground_threads
from juru.store.transactions import write


async def claim_playground_thread(
    engine: Database, thread_id: str, feature: str, now: datetime
) -> str:
    """Record `thread_id` for `feature` unless it exists; return the feature that owns it."""
    statement = (
        dialect_insert(engine.dialect_name, playground_threads)
        .values(thread_id=thread_id, feature=feature, created_at=now, updated_at=now)
        .on_conflict_do_nothing(index_elements=["thread_id"])
    )

    def claim(connection: Connection) -> object:
        connection.execute(statement)
        owner = connection.scalar(
            select(playground_threads.c.feature).where(playground_threads.c.thread_id == thread_id)
        )
        if owner == feature:
            connection.execute(
                update(playground_threads)
                .where(playground_threads.c.thread_id == thread_id)
                .values(updated_at=now)
            )
        return owner

    owner = await write(engine, claim)
    assert owner is not None
    return str(owner)


async def playground_thread_feature(engine: Database, thread_id: str) -> str | None:
    """The feature a playground thread belongs to, or None if it was never used."""
    owner = await engine.scalar(
        select(playground_threads.c.feature).where(playground_threads.c.thread_id == thread_id)
    )
    return None if owner is None else str(owner)
