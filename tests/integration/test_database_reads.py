"""Reads on PostgreSQL run autocommitted: one round trip per query, no BEGIN and ROLLBACK around
it, and nothing they can leave open."""

from __future__ import annotations

import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import Connection, text

from juru.store.database import Database
from juru.store.transactions import write

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


async def test_a_read_opens_no_transaction(store_database: Database) -> None:
    def read(connection: Connection) -> tuple[int, TransactionStatus]:
        value = connection.execute(text("SELECT 1")).scalar_one()
        status = connection.connection.driver_connection.info.transaction_status
        return value, status

    assert await store_database.read(read) == (1, TransactionStatus.IDLE)


async def test_a_write_still_runs_in_one_transaction(store_database: Database) -> None:
    def work(connection: Connection) -> TransactionStatus:
        connection.execute(text("SELECT 1"))
        return connection.connection.driver_connection.info.transaction_status

    assert await write(store_database, work) == TransactionStatus.INTRANS
