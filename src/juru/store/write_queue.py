"""SQLite writes wait in a queue, not in SQLite's busy handler.

SQLite lets one writer at a time into a file; the others would poll in the busy handler (sleeps
of up to 100 ms). Every Juru writer on a file first takes an exclusive `flock` on a lock file
beside the database, through an open file description of its own (so writers exclude each
other in one process as between processes), and only then begins with `BEGIN IMMEDIATE`, which
therefore never finds the file locked by another Juru writer.

Two kinds of writer take it:

- `SqliteWriter`, the store's: one thread with one connection per process. A whole write
  transaction (lock, BEGIN IMMEDIATE, statements, COMMIT, unlock) is one call into that thread,
  so the lock is held for the time the SQL takes, never across turns of a busy event loop.
- `SqliteWriteQueue`, for a connection driven from the event loop (the checkpointer's): an
  asyncio lock queues its users in the process, then the flock is awaited in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from sqlalchemy import Connection, Engine

T = TypeVar("T")


def lock_path_of(database_path: Path) -> Path:
    return database_path.with_name(database_path.name + ".write.lock")


def _open_lock_file(path: Path, owner: object) -> int:
    """A file description of the lock file for `owner` alone (closed when it is collected)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    weakref.finalize(owner, os.close, fd)
    return fd


class SqliteWriter:
    """The store's writes on one SQLite file: each runs whole in this writer's own thread,
    on its own connection, between taking the file's write lock and giving it back."""

    def __init__(self, engine: Engine, database_path: Path) -> None:
        self.engine = engine
        self.lock_path = lock_path_of(database_path)
        self._fd: int | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="juru-sqlite-writer")

    async def run(self, work: Callable[[Connection], T]) -> T:
        """`work` in one transaction, to its COMMIT (or ROLLBACK when it raises)."""
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, self._transaction, work
        )

    def _transaction(self, work: Callable[[Connection], T]) -> T:
        if self._fd is None:
            self._fd = _open_lock_file(self.lock_path, self)
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            with self.engine.connect() as connection:
                connection.exec_driver_sql("BEGIN IMMEDIATE")
                try:
                    result = work(connection)
                except BaseException:
                    connection.rollback()
                    raise
                connection.commit()
                return result
        finally:
            _unlock(self._fd)

    async def dispose(self) -> None:
        """Close the connection (in the thread that made it) and stop the thread."""
        await asyncio.get_running_loop().run_in_executor(self._thread, self.engine.dispose)
        self._thread.shutdown(wait=True)


class SqliteWriteQueue:
    """One writer at a time on a SQLite file for users on the event loop: in this process (an
    asyncio lock) and against every other writer (the `flock`, awaited in a thread)."""

    def __init__(self, database_path: Path) -> None:
        self.lock_path = lock_path_of(database_path)
        self._lock = asyncio.Lock()
        self._fd: int | None = None

    def _file(self) -> int:
        if self._fd is None:
            self._fd = _open_lock_file(self.lock_path, self)
        return self._fd

    async def _take_file_lock(self, fd: int) -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        # Another process is writing: wait for its lock in a thread, not in a polling loop.
        taken = asyncio.get_running_loop().run_in_executor(None, fcntl.flock, fd, fcntl.LOCK_EX)
        try:
            await asyncio.shield(taken)
        except asyncio.CancelledError:
            taken.add_done_callback(lambda done: _unlock_if_taken(done, fd))
            raise

    @contextlib.asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        """Be the only Juru writer on the file while the block runs."""
        async with self._lock:
            fd = self._file()
            await self._take_file_lock(fd)
            try:
                yield
            finally:
                _unlock(fd)

    def saver_lock(self) -> QueueLock:
        """A stand-in for AsyncSqliteSaver's `lock`, so its connection queues with the rest."""
        return QueueLock(self)


def _unlock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)


def _unlock_if_taken(taken: asyncio.Future[None], fd: int) -> None:
    # The waiter was cancelled but its thread got the lock: nobody will use it, give it back.
    if not taken.cancelled() and taken.exception() is None:
        _unlock(fd)


class QueueLock:
    """`async with` entry into a write queue, shaped like the asyncio.Lock it replaces."""

    def __init__(self, queue: SqliteWriteQueue) -> None:
        self._queue = queue
        self._held: list[contextlib.AbstractAsyncContextManager[None]] = []

    def locked(self) -> bool:
        return bool(self._held)

    async def __aenter__(self) -> None:
        holding = self._queue.hold()
        await holding.__aenter__()
        self._held.append(holding)

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._held.pop().__aexit__(kind, error, traceback)
