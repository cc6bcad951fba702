"""`Database`: the store's handle on one database, the only one the rest of Juru holds.

It owns the async SQLAlchemy engine every store query runs on, the SQLite write queue and the
write transactions in progress; nothing outside `juru.store` touches the engine itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from sqlalchemy import Table, event, text
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from juru.store.urls import DatabaseUrl
from juru.store.write_queue import SqliteWriteQueue

SQLITE_BUSY_TIMEOUT_MS = 30_000


def dialect_insert(dialect_name: str, table: Table) -> Any:
    """`INSERT` in the dialect's own form, which has `ON CONFLICT` (SQLite or PostgreSQL)."""
    return (sqlite_insert if dialect_name == "sqlite" else postgresql_insert)(table)


class Database:
    """One database: its engine, its write queue (SQLite) and its writes in progress."""

    def __init__(self, engine: AsyncEngine, write_queue: SqliteWriteQueue | None = None) -> None:
        self.engine = engine
        self.write_queue = write_queue
        # Write transactions in progress: shutdown waits for those their cancelled callers left.
        self.writes_in_flight: set[asyncio.Future[Any]] = set()

    @property
    def dialect_name(self) -> str:
        return self.engine.dialect.name

    def connect(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for reads (writes go through `store.transactions.write`)."""
        return self.engine.connect()

    def begin(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return self.engine.begin()

    async def dispose(self) -> None:
        await self.engine.dispose()


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


def open_database(database: DatabaseUrl, busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS) -> Database:
    """An async engine for `database`; on SQLite tuned for concurrent access (a write waits up
    to `busy_timeout_ms` for a lock held outside Juru's write queue), with the write queue that
    `store.transactions.write` uses."""
    database.ensure_directory()
    if database.is_sqlite:
        engine = create_async_engine(database.async_url())
        event.listen(engine.sync_engine, "connect", _sqlite_tuning(busy_timeout_ms))
        return Database(engine, SqliteWriteQueue(database.sqlite_path))
    return Database(create_async_engine(database.async_url(), pool_pre_ping=True))


async def database_answers(engine: Database) -> str | None:
    """None when the database answers a trivial query, else what went wrong."""
    try:
        async with engine.connect() as connection:
            await connection.execute(text("SELECT 1"))
    except (SQLAlchemyError, OSError) as error:
        return str(error)
    return None
