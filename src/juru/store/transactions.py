"""Write transactions that a cancelled caller cannot cut in half.

Workers cancel a run's task to stop a model call at once (cancel, timeout, lost lease). A
transaction interrupted between its statement and its COMMIT would leave the connection holding
locks, so every write runs in a task of its own that finishes even when its caller is cancelled.

A write is a plain function of a (synchronous) connection. On SQLite it runs whole in the
database's writer thread (`store.write_queue`), which queues the writes and begins each with
`BEGIN IMMEDIATE`, so none of them meets SQLite's busy handler and none holds the file's lock
across turns of the event loop. On PostgreSQL it runs whole in one of the database's writer
threads (`store.database.ThreadedWriter`), on a connection of their pool.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import Connection, bindparam, text

from juru.store.database import Database
from juru.store.lists import JsonRows
from juru.store.write_queue import keep_notices

T = TypeVar("T")
# A notification (channel, payload) sent by a write's own transaction: delivered to the
# listeners when it commits, and never if it rolls back (PostgreSQL's NOTIFY; on SQLite the
# writer's thread tells them after the COMMIT); no transaction of its own.
Notice = tuple[str, str]
# Any number in one statement, in order (a function scan yields the rows in order).
_NOTIFY = text(
    "SELECT pg_notify(notice.item ->> 0, notice.item ->> 1) "
    "FROM json_array_elements(CAST(:notices AS json)) AS notice(item)"
).bindparams(bindparam("notices", type_=JsonRows()))


async def write(
    engine: Database,
    work: Callable[[Connection], T],
    *,
    unsynced_if: Callable[[T], bool] | None = None,
) -> T:
    """Run `work` in one transaction, to its COMMIT or ROLLBACK, whatever happens to the caller
    (a write's notices go out with the events it appends: `store.run_log.append_to_logs`).

    A COMMIT waits until the transaction is on disk, unless `unsynced_if` is true of the
    result: then, on SQLite, it waits for the file to have it, and a crash of the machine
    (not of a process) may lose it. Only for a write that nobody outside Juru's processes
    learns of before a later synced COMMIT, which takes it to disk with its own (the claim of
    a resumed run: no event of the run's log, no answer to a client): a repeatable `work`,
    which SQLite may run twice (`store.write_queue`). PostgreSQL syncs every COMMIT
    (`store.database.ThreadedWriter`)."""
    writer = engine.writer

    async def transaction() -> T:
        return await writer.run(work, unsynced_if)

    task = asyncio.ensure_future(transaction())
    engine.writes_in_flight.add(task)
    task.add_done_callback(engine.writes_in_flight.discard)
    return await asyncio.shield(task)


def notify(connection: Connection, notices: Sequence[Notice]) -> None:
    """Send `notices` from the transaction of `connection` (delivered when it commits): on
    PostgreSQL in one statement, on SQLite by the writer's thread after the COMMIT
    (`store.write_queue`)."""
    if not notices:
        return
    if connection.dialect.name == "postgresql":
        connection.execute(_NOTIFY, {"notices": list(notices)})
    else:
        keep_notices(connection, notices)


@contextmanager
def sent_together(connection: Connection, when: bool = True) -> Iterator[None]:
    """Inside a write: the statements of the block go to PostgreSQL in one round trip (psycopg's
    pipeline mode, synced when the block ends), not one each. Only for statements whose
    results nobody reads: in the block a statement's result has no rows and no row count.
    An error of any of them is raised when the block ends, as the driver's own exception
    (the transaction is then rolled back as for any error). On SQLite, or when `when` is
    false, the block runs as it is."""
    if not when or connection.dialect.name != "postgresql":
        yield
        return
    driver = connection.connection.driver_connection
    assert driver is not None, "a connection inside a transaction has its driver's"
    with driver.pipeline():
        yield


async def wait_for_writes(engine: Database, timeout: float = 10.0) -> None:
    """Let the write transactions in progress finish (before the engine is disposed), but
    never wait longer than `timeout` seconds: shutting down must not hang."""
    if engine.writes_in_flight:
        await asyncio.wait(list(engine.writes_in_flight), timeout=timeout)
