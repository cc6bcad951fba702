"""SQLite writes wait in a queue, not in SQLite's busy handler.

SQLite lets one writer at a time into a file; the others would poll in the busy handler (sleeps
of up to 100 ms). Every Juru writer on a file first takes an exclusive `flock` on a lock file
beside the database, and only then writes (the store's transactions begin with `BEGIN
IMMEDIATE`), so it never finds the file locked by another Juru writer.

Each process has one `SqliteWriter`: one thread that runs every write of the process whole,
the store's transactions on its own connection and the checkpointer's writes on the saver's
(`store.checkpointer`). A write is one call into that thread (take the lock, write, COMMIT,
give the lock back), so the lock is held for the time the SQL takes, never across turns of a
busy event loop, and the writes of a process queue in the thread's queue.

A write's notices (`store.transactions.notify`) wait in its connection until its COMMIT; then
the writer's thread hands them to `tell` (the run events' sockets, `engine.socket_events`)
before the write's result goes back to the event loop, which would take a turn of the loop
first. A write rolled back tells nothing.
"""

from __future__ import annotations

import fcntl
import logging
import os
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine

from juru.store.connections import KeptConnections
from juru.store.joined import prepare_sqlite
from juru.store.threads import DatabaseThreads

T = TypeVar("T")
logger = logging.getLogger(__name__)
# A notice (channel, payload), as `store.transactions.Notice`.
Notices = Sequence[tuple[str, str]]
# Where a transaction keeps its notices until its COMMIT (the connection's `info`).
_NOTICES = "juru_notices"
# SQLite's `synchronous` in WAL mode: FULL syncs the log at every COMMIT; NORMAL leaves it to
# the next synced COMMIT (or checkpoint), which syncs everything written before it.
SYNCED, UNSYNCED = "FULL", "NORMAL"


def lock_path_of(database_path: Path) -> Path:
    return database_path.with_name(database_path.name + ".write.lock")


class SqliteWriter:
    """The writes of this process on one SQLite file, each run whole in the writer's thread
    between taking the file's write lock and giving it back."""

    def __init__(self, engine: Engine, database_path: Path) -> None:
        self.engine = engine
        self.lock_path = lock_path_of(database_path)
        self._fd: int | None = None
        self._thread = DatabaseThreads(1, "juru-sqlite-writer")
        self._connections = KeptConnections(engine)
        # Who sends a committed write's notices to the other processes (none: nobody).
        self.tell: Callable[[Notices], None] | None = None

    async def run(
        self, work: Callable[[Connection], T], unsynced_if: Callable[[T], bool] | None = None
    ) -> T:
        """`work` in one transaction on the writer's connection, to its COMMIT (or ROLLBACK
        when it raises). With `unsynced_if`, true of the result, the COMMIT does not wait for
        the disk (`store.transactions.write`): SQLite decides that before BEGIN, so `work` runs
        with the sync off and, where the result wants it synced after all, is rolled back and
        run again with it on (`work` must be repeatable)."""
        return await self._thread.call(self._write_and_tell, work, unsynced_if)

    async def call(self, write: Callable[..., T], *args: Any) -> T:
        """`write(*args)` in the writer's thread, holding the file's write lock."""
        return await self._thread.call(self._locked, write, *args)

    def _locked(self, write: Callable[..., T], *args: Any) -> T:
        if self._fd is None:
            self._fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            weakref.finalize(self, os.close, self._fd)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            return write(*args)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _write_and_tell(
        self, work: Callable[[Connection], T], unsynced_if: Callable[[T], bool] | None
    ) -> T:
        """The write, then its notices told, once the file's lock is given back."""
        result: T
        result, notices = self._locked(self._transaction, work, unsynced_if)
        if notices and self.tell is not None:
            try:
                self.tell(notices)
            except Exception:  # the write is committed: its notices are only a wake-up
                logger.exception("the notices of a committed write could not be told")
        return result

    def _transaction(
        self, work: Callable[[Connection], T], unsynced_if: Callable[[T], bool] | None = None
    ) -> tuple[T, list[tuple[str, str]]]:
        """`work`'s result, and the notices it kept, once committed."""
        with self._connections.held() as connection:
            if unsynced_if is not None:
                result = _worked(connection, work, UNSYNCED)
                if unsynced_if(result):
                    return result, _committed(connection)
                connection.rollback()
            result = _worked(connection, work, SYNCED)
            return result, _committed(connection)

    async def dispose(self) -> None:
        """Close the connection (in the thread that made it) and stop the thread."""
        await self._thread.call(self._close)
        self._thread.shutdown()

    def _close(self) -> None:
        self._connections.close_all()
        self.engine.dispose()


def _worked(connection: Connection, work: Callable[[Connection], T], synchronous: str) -> T:
    """`work` in a transaction begun `IMMEDIATE` on `connection` with SQLite's `synchronous`
    at `synchronous` (set before BEGIN: SQLite refuses it inside a transaction, and only when
    the connection has another), rolled back when it raises; the caller commits."""
    if connection.info.get("synchronous") != synchronous:
        connection.exec_driver_sql(f"PRAGMA synchronous={synchronous}")
        connection.info["synchronous"] = synchronous
    connection.info[_NOTICES] = []  # none of an earlier try's
    prepare_sqlite(connection)  # the triggers that write a write's parts (`store.joined`)
    connection.exec_driver_sql("BEGIN IMMEDIATE")
    try:
        return work(connection)
    except BaseException:
        connection.rollback()
        raise


def _committed(connection: Connection) -> list[tuple[str, str]]:
    """COMMIT the transaction of `connection`; the notices it kept."""
    connection.commit()
    notices: list[tuple[str, str]] = connection.info.pop(_NOTICES, [])
    return notices


def keep_notices(connection: Connection, notices: Notices) -> None:
    """Keep `notices` in the transaction of the writer's `connection`: told when it commits."""
    kept = connection.info.get(_NOTICES)
    if kept is None:
        raise RuntimeError("notices are kept only in a transaction of the SQLite writer")
    kept.extend(notices)
