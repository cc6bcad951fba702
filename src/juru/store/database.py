"""`Database`: the store's handle on one database, the only one the rest of Juru holds.

Every read and write of Juru's tables runs whole in a thread, on a connection of the thread's
own: on SQLite one writer thread runs every write of the process (the store's and the
checkpointer's) and a few reader threads the reads; on PostgreSQL a few threads each for
writes and for reads. A transaction then holds its connection, and its row locks, for the time
its SQL takes, never across the turns of a busy event loop between its statements (with 100
active runs, that wait had transactions hold their connections for tens of milliseconds, and
requests queue for a connection for up to a second). The async engine is for tests and tools
with SQL of their own. `Database` also keeps the write transactions in progress; nothing
outside `juru.store` touches any of it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from psycopg import _queries as psycopg_queries
from sqlalchemy import Connection, Engine, Executable, RowMapping, Table, create_engine, event, text
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import DisconnectionError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from juru.store.connections import KeptConnections
from juru.store.threads import DatabaseThreads
from juru.store.urls import DatabaseUrl
from juru.store.write_queue import SqliteWriter

SQLITE_BUSY_TIMEOUT_MS = 30_000
# A pooled PostgreSQL connection idle this long is pinged before use (`ping_after_idle`, and
# the checkpointer pool's `IdleConnectionCheck`). Longer than a worker's idle poll (2 s), so the
# poll, which finds its connection where its previous poll left it, does not ping.
PING_AFTER_IDLE_SECONDS = 5.0
# Threads (each with its connection) that SQLite reads run in, per process.
SQLITE_READERS = 4
T = TypeVar("T")


def dialect_insert(dialect_name: str, table: Table) -> Any:
    """`INSERT` in the dialect's own form, which has `ON CONFLICT` (SQLite or PostgreSQL)."""
    return (sqlite_insert if dialect_name == "sqlite" else postgresql_insert)(table)


class ThreadedReader:
    """Reads, each run whole in one of a few threads with connections of their own: one hop
    off the event loop per read, not one per driver call. With `keep_connections` (SQLite)
    each thread keeps the connection it checked out (`store.connections`); else each read
    checks one out of the pool, which hands out the one given back last (PostgreSQL: the
    connections in use stay few and fresh, their statements prepared, whichever thread reads)."""

    def __init__(
        self, engine: Engine, threads: int = SQLITE_READERS, keep_connections: bool = False
    ) -> None:
        self.engine = engine
        self._threads = DatabaseThreads(threads, "juru-db-reader")
        self._connections = KeptConnections(engine) if keep_connections else None

    async def run(self, work: Callable[[Connection], T]) -> T:
        """`work` on a connection of the reader pool."""
        return await self.call(self._read, work)

    async def call(self, read: Callable[..., T], *args: Any) -> T:
        """`read(*args)` in a reader thread."""
        return await self._threads.call(read, *args)

    def _read(self, work: Callable[[Connection], T]) -> T:
        if self._connections is None:
            with self.engine.connect() as checked_out:
                return work(checked_out)
        with self._connections.held() as connection:
            result = work(connection)
            # What the pool's reset did at each return: the read leaves no transaction open
            # (nothing reaches the database when the read opened none).
            connection.rollback()
            return result

    def dispose(self) -> None:
        self._threads.shutdown()
        if self._connections is not None:
            self._connections.close_all()
        self.engine.dispose()


class ThreadedWriter:
    """PostgreSQL write transactions, each run whole (BEGIN to COMMIT, or ROLLBACK when it
    raises) in one of a few threads, on a connection checked out of the pool for it."""

    def __init__(self, engine: Engine, threads: int) -> None:
        self.engine = engine
        self._threads = DatabaseThreads(threads, "juru-db-writer")

    async def run(
        self, work: Callable[[Connection], T], unsynced_if: Callable[[T], bool] | None = None
    ) -> T:
        """`work` in one transaction. Every COMMIT is synced, `unsynced_if` or not: a
        PostgreSQL COMMIT waits about 0.1 ms for its log's flush (the flushes of concurrent
        transactions are shared), and turning it off would take a statement of its own."""
        return await self._threads.call(self._transaction, work)

    def _transaction(self, work: Callable[[Connection], T]) -> T:
        with self.engine.begin() as connection:
            return work(connection)

    async def dispose(self) -> None:
        await asyncio.to_thread(self._threads.shutdown)
        self.engine.dispose()


class Database:
    """One database: its writer and reader threads, an async engine for tests and tools, and
    its writes in progress."""

    def __init__(
        self,
        engine: AsyncEngine,
        writer: SqliteWriter | ThreadedWriter,
        reader: ThreadedReader,
    ) -> None:
        self.engine = engine
        self.writer = writer
        self.reader = reader
        # Write transactions in progress: shutdown waits for those their cancelled callers left.
        self.writes_in_flight: set[asyncio.Future[Any]] = set()

    @property
    def dialect_name(self) -> str:
        return self.engine.dialect.name

    def connect(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection of the async engine, for tests and tools with SQL of their own (the
        store reads through `read` and writes through `store.transactions.write`)."""
        return self.engine.connect()

    async def read(self, work: Callable[[Connection], T]) -> T:
        """Run the read `work` in a reader thread, on a connection of its own (writes go
        through `store.transactions.write`)."""
        return await self.reader.run(work)

    async def first_row(
        self, query: Executable, parameters: dict[str, Any] | None = None
    ) -> RowMapping | None:
        """The first row of a read, or None."""
        return await self.read(lambda c: c.execute(query, parameters).mappings().first())

    async def rows(
        self, query: Executable, parameters: dict[str, Any] | None = None
    ) -> list[RowMapping]:
        """Every row of a read."""
        return await self.read(lambda c: list(c.execute(query, parameters).mappings()))

    async def scalar(self, query: Executable, parameters: dict[str, Any] | None = None) -> Any:
        """The first column of the first row of a read (None when there is no row)."""
        return await self.read(lambda c: c.scalar(query, parameters))

    def begin(self) -> AbstractAsyncContextManager[AsyncConnection]:
        return self.engine.begin()

    def tell_notices_with(self, tell: Callable[[Sequence[tuple[str, str]]], None]) -> bool:
        """On SQLite, have the writer's thread pass each committed write's notices to `tell`
        (`store.write_queue`), and say so; on PostgreSQL the transaction sends them itself
        (NOTIFY): False, nothing to do."""
        if not isinstance(self.writer, SqliteWriter):
            return False
        self.writer.tell = tell
        return True

    async def dispose(self) -> None:
        await self.writer.dispose()
        await asyncio.to_thread(self.reader.dispose)
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


# Threads (each with its connection) that PostgreSQL writes and reads run in, per process. A
# write is CPU work on the database's side: writers past what it can run at once only wait
# inside PostgreSQL, for its CPU and for an account's row, where a queue in the process costs
# nothing (bench/RESULTS.md, sixteenth round: 4 against 16).
POSTGRES_WRITERS = 4
POSTGRES_READERS = 8
# Uses of a statement on a PostgreSQL connection before psycopg prepares it on the server.
PREPARE_AFTER = 5
# The longest statement text whose conversion psycopg keeps (see `keep_long_conversions`).
CONVERTED_STATEMENT_BYTES = 16 * 1024


def keep_long_conversions() -> None:
    """Have psycopg keep the conversion of statements up to `CONVERTED_STATEMENT_BYTES` long.

    psycopg turns a statement's `%(name)s` placeholders into `$1`, `$2` at each execution (on
    a prepared statement too: the converted text names it) and keeps the result in a cache of
    128 texts, but only for a text of up to 4 KiB: longer ones, which ORMs build with varying
    numbers of rows, would crowd the cache out. Juru's statements are fixed texts, built once,
    and a model step's joined write (`store.joined`) is longer than 4 KiB: psycopg parsed its
    5.6 KB with regular expressions again at every execution (0.06 ms of CPU each, about one a
    step). The limit is a constant of psycopg's module, read at each execution; the statements
    of the step path are checked to be converted once (`tests/integration/test_statement_cache.py`).
    """
    psycopg_queries.MAX_CACHED_STATEMENT_LENGTH = max(
        psycopg_queries.MAX_CACHED_STATEMENT_LENGTH, CONVERTED_STATEMENT_BYTES
    )


def open_database(
    database: DatabaseUrl,
    busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS,
    postgres_writers: int = POSTGRES_WRITERS,
) -> Database:
    """The handle on `database`: its reader and writer threads (on SQLite tuned for
    concurrent access: a write waits up to `busy_timeout_ms` for a lock held outside Juru's
    write queue, `store.write_queue`; on PostgreSQL `postgres_writers` of them write), and an
    async engine for tests and tools."""
    database.ensure_directory()
    if database.is_sqlite:
        tuning = _sqlite_tuning(busy_timeout_ms)
        engine = create_async_engine(database.async_url())
        event.listen(engine.sync_engine, "connect", tuning)
        writer_engine = create_engine(database.sync_url())
        # A reader's connection may serve any of the reader threads (one at a time).
        reader_engine = create_engine(
            database.sync_url(),
            connect_args={"check_same_thread": False},
            pool_size=SQLITE_READERS,
        )
        for sync_engine in (writer_engine, reader_engine):
            event.listen(sync_engine, "connect", tuning)
        return Database(
            engine,
            SqliteWriter(writer_engine, database.sqlite_path),
            ThreadedReader(reader_engine, keep_connections=True),
        )
    # One connection per thread, kept in the pool (a new one is a new server process on
    # PostgreSQL's side), handed out last in, first out: the connections a burst opened sit
    # idle at the bottom of the pool instead of taking turns, so the ones in use stay fresh
    # and need no ping (a transaction). A statement run PREPARE_AFTER times on a connection is
    # prepared on the server (psycopg's own rule), so the step path's statements are no longer
    # parsed at each use (reads are still planned: `plan_each_read`); only a ROLLBACK,
    # rare now that reads never end with one, makes psycopg drop them (and send a
    # `DEALLOCATE ALL`). Reads are autocommitted: a query is its own transaction, one round
    # trip instead of three (BEGIN, the query, ROLLBACK); at READ COMMITTED each statement of a
    # transaction took a snapshot of its own anyway, so a read of several queries sees what it
    # saw before.
    keep_long_conversions()
    writer_engine, reader_engine = (
        create_engine(
            database.sync_url(),
            pool_use_lifo=True,
            pool_size=threads,
            max_overflow=0,
            connect_args={"prepare_threshold": PREPARE_AFTER},
            isolation_level=isolation,
        )
        for threads, isolation in (
            (postgres_writers, "READ COMMITTED"),
            (POSTGRES_READERS, "AUTOCOMMIT"),
        )
    )
    for sync_engine in (writer_engine, reader_engine):
        ping_after_idle(sync_engine)
    plan_each_read(reader_engine)
    engine = create_async_engine(database.async_url(), connect_args={"prepare_threshold": None})
    return Database(
        engine,
        ThreadedWriter(writer_engine, postgres_writers),
        ThreadedReader(reader_engine, POSTGRES_READERS),
    )


def plan_each_read(engine: Engine) -> None:
    """Have PostgreSQL plan every execution of the engine's prepared statements for its values
    and the tables as they stand. By default it keeps one generic plan from a statement's
    sixth execution on, until the table is next analyzed, and one made while a table was nearly
    empty (a new database) read every run of an account to find one by its id once there were
    thousands. Set per session rather than as a startup option, which poolers may refuse.
    Writes keep their generic plans (docs/decisions.md, "Reads planned at each use")."""

    @event.listens_for(engine, "connect")
    def planned_at_each_use(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET plan_cache_mode = force_custom_plan")
        dbapi_connection.commit()


def ping_after_idle(engine: Engine, idle_seconds: float = PING_AFTER_IDLE_SECONDS) -> None:
    """Check a pooled connection with a round trip only when it sat idle `idle_seconds` or more
    (SQLAlchemy's `pool_pre_ping` does it on every checkout: on psycopg an autocommitted
    `SELECT 1`, one transaction more per query). A connection the server dropped meanwhile (a
    restart, an outage) is replaced before a query meets it; one dropped in the last moments
    fails its query once, as an outage, and the pool is then renewed."""

    @event.listens_for(engine, "checkin")
    def returned(_dbapi_connection: Any, record: Any) -> None:
        record.info["returned_at"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def check(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        returned_at = record.info.get("returned_at")
        if returned_at is not None and time.monotonic() - returned_at < idle_seconds:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as error:
            raise DisconnectionError(str(error)) from error


async def database_answers(engine: Database) -> str | None:
    """None when the database answers a trivial query, else what went wrong."""
    try:
        await engine.scalar(text("SELECT 1"))
    except (SQLAlchemyError, OSError) as error:
        return str(error)
    return None
