"""Reads on PostgreSQL run autocommitted: one round trip per query, no BEGIN and ROLLBACK around
it, and nothing they can leave open; writes run whole in `JURU_POSTGRES_WRITERS` threads, each
with its connection; a statement used often is prepared on the server, for reads and writes,
and a prepared read is still planned at each use."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from psycopg.pq import TransactionStatus
from sqlalchemy import Connection, insert, select, text

from juru.context import open_context
from juru.store import runs as run_store
from juru.store.database import PREPARE_AFTER, Database
from juru.store.tables import runs
from juru.store.transactions import write
from tests.conftest import make_settings
from tests.support.hosted import HostedHarness

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


def _plan_nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from _plan_nodes(child)


def _prepared_plan(
    connection: Connection, statement_start: str, arguments: str
) -> list[dict[str, Any]]:
    """The nodes of the plan that the connection's prepared statement starting with
    `statement_start` runs with `arguments` (literals) now, as it ran."""
    query = text("SELECT name FROM pg_prepared_statements WHERE starts_with(statement, :start)")
    name = connection.execute(query, {"start": statement_start}).scalar_one()
    explained = connection.execute(
        text(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}({arguments})")
    )
    return list(_plan_nodes(explained.scalar_one()[0]["Plan"]))


async def _thousands_of_ended_runs_like(engine: Database, run_id: str) -> None:
    """Copies of the run, ended, written without any ANALYZE after them (as on a database whose
    autovacuum is off or has not come round yet)."""

    def copy(connection: Connection) -> None:
        row = connection.execute(select(runs).where(runs.c.id == run_id)).one()._asdict()
        ended = {**row, "status": "succeeded", "idempotency_key": None, "lease_owner": None}
        copies = [{**ended, "id": f"{run_id}_{n:05d}"} for n in range(3000)]
        connection.execute(insert(runs), copies)

    await write(engine, copy)


async def test_a_run_read_prepared_on_a_new_database_still_takes_its_primary_key(
    hosted: HostedHarness,
) -> None:
    # The read of a run, prepared on the server while the account had one run, must not keep
    # a plan made for that nearly empty table: one that walks the account's runs to find the
    # one asked for costs a read of every run the account has.
    engine, account = hosted.context.engine, hosted.account_id
    run_id = (await hosted.new_run())["id"]
    # psycopg prepares it at its use after PREPARE_AFTER; PostgreSQL plans a prepared
    # statement's first five executions for their values and may keep a generic plan after.
    for _ in range(PREPARE_AFTER + 8):
        assert await run_store.get_run(engine, run_id, account) is not None
    await _thousands_of_ended_runs_like(engine, run_id)

    def plan(connection: Connection) -> list[dict[str, Any]]:
        start = "SELECT runs.id, runs.account_id"
        return _prepared_plan(connection, start, f"'{run_id}', '{account}'")

    nodes = await engine.read(plan)
    assert [node.get("Index Name") for node in nodes] == ["pk_runs"]
    assert sum(node.get("Rows Removed by Filter", 0) for node in nodes) == 0


async def test_reads_are_planned_at_each_use_and_writes_once(store_database: Database) -> None:
    def plans(connection: Connection) -> str:
        return str(connection.execute(text("SHOW plan_cache_mode")).scalar_one())

    assert await store_database.read(plans) == "force_custom_plan"
    # Writes keep PostgreSQL's default: the step path's statements are planned once.
    assert await write(store_database, plans) == "auto"
