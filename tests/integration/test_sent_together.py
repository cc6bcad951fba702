"""Statements sent together (`store.transactions.sent_together`): on PostgreSQL the block's
statements go out in one round trip and their errors surface when it ends; on both databases
the block belongs to its write's transaction, committed or rolled back whole, and a failed write
leaves its connection ready for the next, a lost one included."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest
from psycopg.errors import UniqueViolation
from sqlalchemy import Connection, select, text
from sqlalchemy.exc import IntegrityError

from juru.store.database import Database
from juru.store.outage import is_outage
from juru.store.tables import playground_threads
from juru.store.transactions import sent_together, write

NOW = datetime(2026, 12, 3, tzinfo=UTC)


def insert_thread(connection: Connection, thread_id: str) -> None:
    connection.execute(
        playground_threads.insert(),
        {"thread_id": thread_id, "feature": "f", "created_at": NOW, "updated_at": NOW},
    )


async def stored_threads(database: Database) -> list[str]:
    rows = await database.rows(select(playground_threads.c.thread_id).order_by("thread_id"))
    return [row["thread_id"] for row in rows]


async def test_the_block_commits_with_its_write(store_database: Database) -> None:
    def work(connection: Connection) -> None:
        insert_thread(connection, "before")
        with sent_together(connection):
            insert_thread(connection, "in-1")
            insert_thread(connection, "in-2")

    await write(store_database, work)
    assert await stored_threads(store_database) == ["before", "in-1", "in-2"]


async def test_an_error_in_the_block_rolls_the_whole_write_back(store_database: Database) -> None:
    reached: list[str] = []

    def work(connection: Connection) -> None:
        insert_thread(connection, "before")
        with sent_together(connection):
            insert_thread(connection, "twice")
            insert_thread(connection, "twice")
            reached.append("after the failing statement")

    with pytest.raises((IntegrityError, UniqueViolation)):
        await write(store_database, work)
    assert await stored_threads(store_database) == []
    # On PostgreSQL the statements were only queued: the failure comes when the block ends.
    pipelined = store_database.dialect_name == "postgresql"
    assert reached == (["after the failing statement"] if pipelined else [])


async def test_the_block_runs_statement_by_statement_when_told_not_to_pipeline(
    store_database: Database,
) -> None:
    reached: list[str] = []

    def work(connection: Connection) -> None:
        with sent_together(connection, when=False):
            insert_thread(connection, "twice")
            insert_thread(connection, "twice")
            reached.append("after the failing statement")

    with pytest.raises(IntegrityError):
        await write(store_database, work)
    assert reached == []


async def test_an_error_after_the_block_drops_what_waited_in_it(
    store_database: Database,
) -> None:
    def work(connection: Connection) -> None:
        with sent_together(connection):
            insert_thread(connection, "waiting")
        raise ValueError("the caller's own error")

    with pytest.raises(ValueError):
        await write(store_database, work)
    assert await stored_threads(store_database) == []
    # The connection is back in the pool, out of any transaction: the next write commits.
    await write(store_database, lambda connection: insert_thread(connection, "next"))
    assert await stored_threads(store_database) == ["next"]


async def test_a_write_after_a_failed_one_commits(store_database: Database) -> None:
    def twice(connection: Connection) -> None:
        insert_thread(connection, "twice")
        insert_thread(connection, "twice")

    for _ in range(2):  # the writers' pool hands the same connection out again
        with pytest.raises(IntegrityError):
            await write(store_database, twice)
    await write(store_database, lambda connection: insert_thread(connection, "after"))
    assert await stored_threads(store_database) == ["after"]


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_a_connection_lost_in_a_write_is_an_outage_and_the_next_write_commits(
    store_database: Database, caplog: pytest.LogCaptureFixture
) -> None:
    def work(connection: Connection) -> None:
        with sent_together(connection):
            insert_thread(connection, "lost")
            # The server ends the session as it reaches this, before the COMMIT.
            connection.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))

    with pytest.raises(Exception) as raised:
        await write(store_database, work)
    assert is_outage(raised.value)
    await write(store_database, lambda connection: insert_thread(connection, "next"))
    assert await stored_threads(store_database) == ["next"]
    assert not [record for record in caplog.records if record.levelno >= logging.ERROR]
