"""The async SQLAlchemy engine that every store query runs on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from juru.store.transactions import attach_write_queue
from juru.store.urls import DatabaseUrl
from juru.store.write_queue import SqliteWriteQueue

SQLITE_BUSY_TIMEOUT_MS = 30_000


def _sqlite_tuning(busy_timeout_ms: int) -> Callable[[Any, Any], None]:
    def tune(dbapi_connection: Any, _record: Any) -> None:
        # WAL lets readers work while a writer commits. Juru's own writers queue
        # (store.write_queue); the busy timeout is for anyone else on the file.
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return tune


def create_engine(
    database: DatabaseUrl, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS
) -> AsyncEngine:
    """An async engine for `database`; on SQLite tuned for concurrent access (a write waits up
    to `busy_timeout_ms` for a lock held outside Juru's write queue), with the write queue that
    `store.transactions.write` uses."""
    database.ensure_directory()
    if database.is_sqlite:
        engine = create_async_engine(database.async_url())
        event.listen(engine.sync_engine, "connect", _sqlite_tuning(busy_timeout_ms))
        attach_write_queue(engine, SqliteWriteQueue(database.sqlite_path))
        return engine
    return create_async_engine(database.async_url(), pool_pre_ping=True)


async def database_answers(engine: AsyncEngine) -> str | None:
    """None when the database answers a trivial query, else what went wrong."""
    try:
        async with engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError) as error:
        return str(error)
    return None
