"""Reads on PostgreSQL run autocommitted: one round trip per query, no BEGIN and ROLLBACK around
it, and nothing they can leave open; writes run whole in `JURU_POSTGRES_WRITERS` threads, each
with its connection; a statement used often is prepared on the server, for reads and writes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import Connection, text

from juru.context import open_context
from juru.store.database import PREPARE_AFTER, Database
from juru.store.transactions import write
from tests.conftest import make_settings

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


async def prepared_after_uses(run: Callable[[Callable[[Connection], Any]], Awaitable[Any]]) -> None:
    """A statement run by `run` (one at a time, each on the connection last given back: the
    pool is last in, first out) is not prepared after PREPARE_AFTER uses, and is at the next."""

    def count_queued(connection: Connection) -> int:
        query = text("SELECT count(*) FROM runs WHERE status = :status")
        return int(connection.execute(query, {"status": "queued"}).scalar_one())

    def prepared(connection: Connection) -> list[str]:
        query = text("SELECT statement FROM pg_prepared_statements")
        return [str(statement) for statement in connection.execute(query).scalars()]

    for _ in range(PREPARE_AFTER):
        await run(count_queued)
    assert not [s for s in await run(prepared) if "FROM runs WHERE status" in s]
    await run(count_queued)  # the next use is prepared
    assert [s for s in await run(prepared) if "FROM runs WHERE status" in s]


async def test_a_read_used_often_is_prepared_on_the_server(store_database: Database) -> None:
    await prepared_after_uses(store_database.read)


async def test_a_write_used_often_is_prepared_on_the_server(store_database: Database) -> None:
    await prepared_after_uses(lambda work: write(store_database, work))


async def test_writes_run_on_as_many_connections_as_the_setting_says(database_url: str) -> None:
    # Writers that must all be inside their transactions at once get through only if the
    # process runs that many at a time (a missing one leaves the others at the barrier).
    writers = 3
    together = threading.Barrier(writers, timeout=30)

    def backend(connection: Connection) -> int:
        return int(connection.execute(text("SELECT pg_backend_pid()")).scalar_one())

    def meet(connection: Connection) -> int:
        together.wait()
        return backend(connection)

    async with open_context(make_settings(database_url, postgres_writers=writers)) as context:
        engine = context.engine
        met = await asyncio.gather(*(write(engine, meet) for _ in range(writers)))
        many = await asyncio.gather(*(write(engine, backend) for _ in range(40)))
    assert len(set(met)) == writers
    # No more connections than that, however many writes wait.
    assert set(many) <= set(met)
