"""SQLite writes wait in a queue, not in SQLite's busy handler.

SQLite lets one writer at a time into a file; the others would poll in the busy handler (sleeps
of up to 100 ms). Here a writer first takes an asyncio lock (one writer per engine in this
process: the store's transactions and the checkpointer's connection share it), then an `flock`
on a lock file beside the database (one writer between processes), and only then `BEGIN
IMMEDIATE`, which therefore never finds the file locked by another Juru writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import weakref
from collections.abc import AsyncIterator
from pathlib import Path
from types import TracebackType


class SqliteWriteQueue:
    """One writer at a time on a SQLite file: in this process (asyncio) and between processes
    (an exclusive `flock` on `<database>.write.lock`, awaited in a thread)."""

    def __init__(self, database_path: Path) -> None:
        self.lock_path = database_path.with_name(database_path.name + ".write.lock")
        self._lock = asyncio.Lock()
        self._fd: int | None = None

    def _file(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            weakref.finalize(self, os.close, self._fd)
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
