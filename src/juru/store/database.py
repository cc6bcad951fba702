"""The async SQLAlchemy engine that every store query runs on."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from juru.store.urls import DatabaseUrl

SQLITE_BUSY_TIMEOUT_MS = 30_000


def _sqlite_tuning(busy_timeout_ms: int) -> Callable[[Any, Any], None]:
    def tune(dbapi_connection: Any, _record: Any) -> None:
        # WAL lets readers and the checkpointer's connection work while a writer commits.
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return tune


def create_engine(
    database: DatabaseUrl, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS
) -> AsyncEngine:
    """An async engine for `database`, with SQLite tuned for concurrent access (a write waits
    up to `busy_timeout_ms` for another connection's lock)."""
    database.ensure_directory()
    if database.is_sqlite:
        engine = create_async_engine(database.async_url())
        event.listen(engine.sync_engine, "connect", _sqlite_tuning(busy_timeout_ms))
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
