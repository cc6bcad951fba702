"""Reads on PostgreSQL run autocommitted: one round trip per query, no BEGIN and ROLLBACK around
it, and nothing they can leave open."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import Connection, text

from juru.store.database import Database, open_database
from juru.store.transactions import write
from juru.store.urls import DatabaseUrl

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[Database]:
    database = open_database(DatabaseUrl.parse(database_url))
    yield database
    await database.dispose()


async def test_a_read_opens_no_transaction(engine: Database) -> None:
    def read(connection: Connection) -> tuple[int, TransactionStatus]:
        value = connection.execute(text("SELECT 1")).scalar_one()
        status = connection.connection.driver_connection.info.transaction_status
        return value, status

    assert await engine.read(read) == (1, TransactionStatus.IDLE)


async def test_a_write_still_runs_in_one_transaction(engine: Database) -> None:
    def work(connection: Connection) -> TransactionStatus:
        connection.execute(text("SELECT 1"))
        return connection.connection.driver_connection.info.transaction_status

    assert await write(engine, work) == TransactionStatus.INTRANS
