"""Statements sent together (`store.transactions.sent_together`): on PostgreSQL the block's
statements go out in one round trip and their errors surface when it ends; on both databases
the block belongs to its write's transaction, committed or rolled back whole."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from psycopg.errors import UniqueViolation
from sqlalchemy import Connection, select
from sqlalchemy.exc import IntegrityError

from juru.store.database import Database
from juru.store.tables import playground_threads
from juru.store.transactions import sent_together, write

NOW = datetime(2026, 12, 3, tzinfo=UTC)


def _insert(connection: Connection, thread_id: str) -> None:
    connection.execute(
        playground_threads.insert(),
        {"thread_id": thread_id, "feature": "f", "created_at": NOW, "updated_at": NOW},
    )


async def _stored(database: Database) -> list[str]:
    rows = await database.rows(select(playground_threads.c.thread_id).order_by("thread_id"))
    return [row["thread_id"] for row in rows]


async def test_the_block_commits_with_its_write(store_database: Database) -> None:
    def work(connection: Connection) -> None:
        _insert(connection, "before")
        with sent_together(connection):
            _insert(connection, "in-1")
            _insert(connection, "in-2")

    await write(store_database, work)
    assert await _stored(store_database) == ["before", "in-1", "in-2"]


async def test_an_error_in_the_block_rolls_the_whole_write_back(store_database: Database) -> None:
    reached: list[str] = []

    def work(connection: Connection) -> None:
        _insert(connection, "before")
        with sent_together(connection):
            _insert(connection, "twice")
            _insert(connection, "twice")
            reached.append("after the failing statement")

    with pytest.raises((IntegrityError, UniqueViolation)):
        await write(store_database, work)
    assert await _stored(store_database) == []
    # On PostgreSQL the statements were only queued: the failure comes when the block ends.
    pipelined = store_database.dialect_name == "postgresql"
    assert reached == (["after the failing statement"] if pipelined else [])


async def test_the_block_runs_statement_by_statement_when_told_not_to_pipeline(
    store_database: Database,
) -> None:
    reached: list[str] = []

    def work(connection: Connection) -> None:
        with sent_together(connection, when=False):
            _insert(connection, "twice")
            _insert(connection, "twice")
            reached.append("after the failing statement")

    with pytest.raises(IntegrityError):
        await write(store_database, work)
    assert reached == []
