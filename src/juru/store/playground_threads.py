"""Queries on `playground_threads`: which feature each playground thread belongs to."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select

from juru.store.database import Database, dialect_insert
from juru.store.tables import playground_threads
from juru.store.transactions import write


async def claim_playground_thread(
    engine: Database, thread_id: str, feature: str, now: datetime
) -> str:
    """Record `thread_id` for `feature` unless it exists; return the feature that owns it.

    One statement in the usual case: the thread is new, or already `feature`'s (its
    `updated_at` moves); a thread of another feature is left as it is and its owner read."""
    insert = dialect_insert(engine.dialect_name, playground_threads).values(
        thread_id=thread_id, feature=feature, created_at=now, updated_at=now
    )
    statement = insert.on_conflict_do_update(
        index_elements=["thread_id"],
        set_={"updated_at": now},
        where=playground_threads.c.feature == feature,
    ).returning(playground_threads.c.feature)

    def claim(connection: Connection) -> object:
        owner = connection.scalar(statement)
        if owner is None:
            owner = connection.scalar(
                select(playground_threads.c.feature).where(
                    playground_threads.c.thread_id == thread_id
                )
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
