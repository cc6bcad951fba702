"""LangGraph's checkpointer on the same database as Juru's tables."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from psycopg import AsyncConnection
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from juru.store.database import SQLITE_BUSY_TIMEOUT_MS
from juru.store.urls import DatabaseUrl
from juru.store.write_queue import SqliteWriteQueue

POSTGRES_POOL_MAX = 10


@asynccontextmanager
async def open_checkpointer(
    database: DatabaseUrl,
    write_queue: SqliteWriteQueue | None = None,
    busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS,
) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """Open (and set up) the SQLite or PostgreSQL saver for `database`.

    On SQLite with a `write_queue`, the saver's connection waits in that queue (the engine's)
    instead of in its own lock, so its writes never meet the busy handler either.
    """
    if database.is_sqlite:
        database.ensure_directory()
        async with aiosqlite.connect(database.sqlite_path) as connection:
            await connection.execute("PRAGMA journal_mode=WAL")
            await connection.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            sqlite_saver = AsyncSqliteSaver(connection)
            if write_queue is not None:
                # The saver serialises every use of its connection on `lock`.
                sqlite_saver.lock = write_queue.saver_lock()  # type: ignore[assignment]
            await sqlite_saver.setup()
            yield sqlite_saver
        return
    options: dict[str, Any] = {"prepare_threshold": 0, "row_factory": dict_row}
    # The saver's migrations create indexes concurrently: outside a transaction.
    async with await AsyncConnection.connect(
        database.libpq_dsn(), autocommit=True, **options
    ) as setup_connection:
        await AsyncPostgresSaver(setup_connection).setup()
    # Without autocommit each of the saver's calls is one transaction (the pool commits when
    # the saver gives the connection back), not one per statement.
    pool = AsyncConnectionPool(
        database.libpq_dsn(),
        min_size=1,
        max_size=POSTGRES_POOL_MAX,
        open=False,
        # A connection that a database restart broke is replaced, not handed to LangGraph.
        check=AsyncConnectionPool.check_connection,
        kwargs={"autocommit": False, **options},
    )
    async with pool:
        yield AsyncPostgresSaver(pool)  # type: ignore[arg-type]


async def settle_checkpointer(checkpointer: BaseCheckpointSaver[Any]) -> None:
    """Roll back a checkpoint write that a cancelled task left half-done.

    The SQLite saver shares one connection; a write cancelled before its COMMIT would keep the
    database locked for everyone else.
    """
    if isinstance(checkpointer, AsyncSqliteSaver):
        async with checkpointer.lock:
            if checkpointer.conn.in_transaction:
                await checkpointer.conn.rollback()
