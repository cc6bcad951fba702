"""SQLite writes queue: with the busy handler switched off, concurrent writers from two engines
(two lock-file descriptions, as two processes have) and the checkpointer never find the file
locked."""

from __future__ import annotations

import asyncio
import fcntl
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, event, func, insert, select, text
from sqlalchemy.exc import IntegrityError

from juru.store import checkpointer as checkpointer_module
from juru.store import database as database_module
from juru.store.checkpointer import open_checkpointer
from juru.store.database import open_database
from juru.store.migrations import upgrade_to_head
from juru.store.tables import playground_threads
from juru.store.transactions import write
from juru.store.urls import DatabaseUrl

WRITES = 60

# Another process writing the same file through its own engine and queue.
OTHER_PROCESS = """
import asyncio, sys
from sqlalchemy import insert
from juru.store import database
database.SQLITE_BUSY_TIMEOUT_MS = 0
from juru.store.database import open_database
from juru.store.tables import playground_threads
from juru.store.transactions import write
from juru.store.urls import DatabaseUrl
import datetime

async def main() -> None:
    engine = open_database(DatabaseUrl.parse(sys.argv[1]))
    now = datetime.datetime.now(datetime.UTC)
    async def one(i: int) -> None:
        statement = insert(playground_threads).values(
            thread_id=f"other-{i}", feature="f", created_at=now, updated_at=now
        )
        await write(engine, lambda connection: connection.execute(statement))
    await asyncio.gather(*(one(i) for i in range(int(sys.argv[2]))))
    await engine.dispose()

asyncio.run(main())
"""


@pytest.fixture
def no_busy_handler(monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that met a locked file would fail at once with `database is locked`."""
    monkeypatch.setattr(database_module, "SQLITE_BUSY_TIMEOUT_MS", 0)
    monkeypatch.setattr(checkpointer_module, "SQLITE_BUSY_TIMEOUT_MS", 0)


async def test_writers_of_two_engines_and_the_checkpointer_queue(
    tmp_path: Path, no_busy_handler: None
) -> None:
    url = f"sqlite:///{tmp_path}/juru.db"
    database = DatabaseUrl.parse(url)
    upgrade_to_head(database)
    first, second = open_database(database), open_database(database)
    other = subprocess.Popen(
        [sys.executable, "-c", OTHER_PROCESS, url, str(WRITES)], stderr=subprocess.PIPE
    )
    try:
        async with open_checkpointer(database, first) as saver:

            async def one(index: int) -> None:
                engine = first if index % 2 else second
                now = datetime.now(UTC)
                statement = insert(playground_threads).values(
                    thread_id=f"t-{index}", feature="f", created_at=now, updated_at=now
                )
                await write(engine, lambda connection: connection.execute(statement))
                config: Any = {
                    "configurable": {
                        "thread_id": f"t-{index}",
                        "checkpoint_ns": "",
                        "checkpoint_id": "1",
                    }
                }
                await saver.aput_writes(config, [("channel", index)], f"task-{index}")

            await asyncio.gather(*(one(index) for index in range(WRITES)))
        _, errors = await asyncio.to_thread(other.communicate, timeout=120)
        assert other.returncode == 0, errors.decode()
        async with first.connect() as connection:
            count = await connection.scalar(select(func.count()).select_from(playground_threads))
        assert count == 2 * WRITES
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
        await first.dispose()
        await second.dispose()


async def test_a_write_begins_immediate(tmp_path: Path) -> None:
    database = DatabaseUrl.parse(f"sqlite:///{tmp_path}/juru.db")
    upgrade_to_head(database)
    engine = open_database(database)
    try:
        # A transaction begun IMMEDIATE holds the write lock before its first statement.
        def probe(connection: Connection) -> bool:
            raw: Any = connection.connection.driver_connection
            return bool(raw.in_transaction)

        assert await write(engine, probe)
        async with engine.connect() as connection:
            assert await connection.scalar(text("SELECT 1")) == 1
    finally:
        await engine.dispose()


async def test_writes_and_reads_keep_their_threads_connections_until_one_fails(
    tmp_path: Path,
) -> None:
    """The writer thread and each reader thread check a connection out once and keep it; one
    whose work raised goes back to the pool, and the next use checks out another."""
    database = DatabaseUrl.parse(f"sqlite:///{tmp_path}/juru.db")
    upgrade_to_head(database)
    engine = open_database(database)
    checkouts: list[str] = []
    for name, pool in (
        ("writer", engine.writer.engine.pool),
        ("reader", engine.reader.engine.pool),
    ):
        event.listen(pool, "checkout", lambda *_args, name=name: checkouts.append(name))
    now = datetime.now(UTC)

    def add(connection: Connection, index: int) -> None:
        values = {"thread_id": f"t{index}", "feature": "f", "created_at": now, "updated_at": now}
        connection.execute(insert(playground_threads).values(values))

    def count(connection: Connection) -> int:
        return int(connection.scalar(select(func.count()).select_from(playground_threads)) or 0)

    try:
        for index in range(5):
            await write(engine, lambda connection, index=index: add(connection, index))
            assert await engine.read(count) == index + 1
        assert checkouts.count("writer") == 1
        assert checkouts.count("reader") <= database_module.SQLITE_READERS
        # A write that fails (the same id twice) is rolled back, and its connection let go.
        with pytest.raises(IntegrityError):
            await write(engine, lambda connection: add(connection, 0))
        await write(engine, lambda connection: add(connection, 5))
        assert checkouts.count("writer") == 2
        assert await engine.read(count) == 6
        # A read leaves no transaction open: a write from another engine sees no reader
        # holding an old snapshot, and the next read sees it.
        other = open_database(database)
        try:
            await write(other, lambda connection: add(connection, 6))
        finally:
            await other.dispose()
        assert await engine.read(count) == 7
    finally:
        await engine.dispose()


async def test_a_write_holds_the_lock_without_the_event_loop(tmp_path: Path) -> None:
    """The store's write runs whole in the writer thread: it takes the file's write lock,
    commits and gives the lock back while the event loop is not running at all."""
    database = DatabaseUrl.parse(f"sqlite:///{tmp_path}/juru.db")
    upgrade_to_head(database)
    engine = open_database(database)
    assert engine.writer is not None
    lock_file = os.open(engine.writer.lock_path, os.O_RDWR | os.O_CREAT)
    started, taken = threading.Event(), threading.Event()
    threads: list[str] = []

    def work(connection: Connection) -> None:
        threads.append(threading.current_thread().name)
        started.set()
        now = datetime.now(UTC)
        connection.execute(
            insert(playground_threads).values(
                thread_id="t", feature="f", created_at=now, updated_at=now
            )
        )

    def take_lock() -> None:
        # Another writer's lock: granted only once the write has given the file back.
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        taken.set()

    try:
        pending = asyncio.ensure_future(write(engine, work))
        while not started.is_set():
            await asyncio.sleep(0)  # turns of the loop until the writer has the write
        other = threading.Thread(target=take_lock)
        other.start()
        # The loop is blocked here; the write must still finish and free the lock.
        assert taken.wait(timeout=30), "the write kept the lock until the loop ran again"
        other.join()
        fcntl.flock(lock_file, fcntl.LOCK_UN)
        await pending
        assert threads and threads[0].startswith("juru-sqlite-writer")
        assert await engine.scalar(select(func.count()).select_from(playground_threads)) == 1
    finally:
        os.close(lock_file)
        await engine.dispose()


class GatedSerializer:
    """The saver's serializer, holding each value until the test lets it through: a put_writes
    stopped in the middle of its statement, in the writer thread."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.entered, self.release = threading.Event(), threading.Event()

    def dumps_typed(self, value: Any) -> tuple[str, bytes]:
        self.entered.set()
        self.release.wait(timeout=30)
        return self.inner.dumps_typed(value)  # type: ignore[no-any-return]

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)


class WatchedLock:
    """The saver's lock, telling when a second thread waits for it."""

    def __init__(self) -> None:
        self.lock, self.contended = threading.Lock(), threading.Event()

    def __enter__(self) -> None:
        if not self.lock.acquire(blocking=False):
            self.contended.set()
            self.lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


async def test_closing_the_checkpointer_waits_for_a_write_in_the_writer_thread(
    tmp_path: Path,
) -> None:
    """A write whose caller was cancelled still runs in the writer thread; closing the saver's
    connection under it would crash the process. The close waits, and the write is kept."""
    database = DatabaseUrl.parse(f"sqlite:///{tmp_path}/juru.db")
    upgrade_to_head(database)
    engine = open_database(database)
    config: Any = {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "1"}}
    lock = WatchedLock()
    try:
        async with open_checkpointer(database, engine) as saver:
            gate = GatedSerializer(saver.serde)
            saver.serde, saver.lock = gate, lock  # type: ignore[assignment]
            pending = asyncio.ensure_future(saver.aput_writes(config, [("channel", 1)], "task"))
            assert await asyncio.to_thread(gate.entered.wait, 30)
            pending.cancel()

            def release_once_the_close_waits() -> None:
                lock.contended.wait(timeout=30)
                gate.release.set()

            threading.Thread(target=release_once_the_close_waits).start()
        assert lock.contended.is_set(), "the connection was closed under the write"
        async with engine.connect() as connection:
            rows = await connection.scalar(text("SELECT count(*) FROM writes WHERE thread_id='t'"))
        assert rows == 1
    finally:
        await engine.dispose()


def synchronous_level(connection: Connection) -> int:
    """SQLite's `synchronous` of the connection: 1 NORMAL (a COMMIT not synced), 2 FULL."""
    return int(connection.exec_driver_sql("PRAGMA synchronous").scalar_one())


async def test_a_write_commits_unsynced_only_when_its_result_allows_it(tmp_path: Path) -> None:
    database = DatabaseUrl.parse(f"sqlite:///{tmp_path}/juru.db")
    upgrade_to_head(database)
    engine = open_database(database)
    seen: list[int] = []

    def insert_thread(name: str) -> Any:
        def work(connection: Connection) -> str:
            seen.append(synchronous_level(connection))
            now = datetime.now(UTC)
            connection.execute(
                insert(playground_threads).values(
                    thread_id=name, feature="f", created_at=now, updated_at=now
                )
            )
            return name

        return work

    try:
        await write(engine, insert_thread("quiet"), unsynced_if=lambda name: True)
        assert seen == [1]
        # Its result wants the COMMIT synced: the unsynced try is rolled back, then redone.
        seen.clear()
        await write(engine, insert_thread("told"), unsynced_if=lambda name: False)
        assert seen == [1, 2]
        seen.clear()
        await write(engine, insert_thread("plain"))
        assert seen == [2]
        names = await engine.rows(select(playground_threads.c.thread_id))
        assert sorted(row["thread_id"] for row in names) == ["plain", "quiet", "told"]
    finally:
        await engine.dispose()
