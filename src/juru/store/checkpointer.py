"""LangGraph's checkpointer on the same database as Juru's tables."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import weakref
from collections import OrderedDict
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.postgres import PostgresSaver as SyncPostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite import SqliteSaver
from psycopg import AsyncConnection, Cursor
from psycopg import Connection as PsycopgConnection
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool
from sqlalchemy import Connection

from juru.store.database import (
    PING_AFTER_IDLE_SECONDS,
    SQLITE_BUSY_TIMEOUT_MS,
    Database,
    ThreadedReader,
    open_database,
)
from juru.store.urls import DatabaseUrl
from juru.store.write_queue import SqliteWriter

POSTGRES_POOL_MAX = 10
# Checkpoints of paused runs a saver keeps for their resume in this process (`keep_pause`): the
# oldest go first.
PAUSES_KEPT = 256


# Within `reading_once()`: the latest checkpoint of each (thread, namespace) read so far and not
# yet read again, so that a caller's look at a thread's state and the graph's own load at the
# start of its run that follows share one read.
_unconsumed_reads: ContextVar[dict[tuple[str, str], CheckpointTuple | None] | None] = ContextVar(
    "unconsumed_checkpoint_reads", default=None
)


@contextmanager
def reading_once() -> Iterator[None]:
    """Let the next read of a thread's latest checkpoint reuse the one just made (until a write
    of the saver's, which forgets it)."""
    token = _unconsumed_reads.set({})
    try:
        yield
    finally:
        _unconsumed_reads.reset(token)


def _latest_key(config: RunnableConfig) -> tuple[str, str] | None:
    configurable = config.get("configurable") or {}
    if configurable.get("checkpoint_id"):
        return None
    return str(configurable.get("thread_id")), str(configurable.get("checkpoint_ns", ""))


def _fresh(found: CheckpointTuple | None) -> CheckpointTuple | None:
    """A copy of the tuple's mutable maps: LangGraph updates a loaded checkpoint in place."""
    if found is None:
        return None
    checkpoint = found.checkpoint
    copied: Checkpoint = {
        **checkpoint,
        "channel_values": dict(checkpoint["channel_values"]),
        "channel_versions": dict(checkpoint["channel_versions"]),
        "versions_seen": {node: dict(seen) for node, seen in checkpoint["versions_seen"].items()},
    }
    return found._replace(checkpoint=copied)


async def read_once(
    config: RunnableConfig, read: Callable[[], Awaitable[CheckpointTuple | None]]
) -> CheckpointTuple | None:
    """`read()` the checkpoint `config` names, unless it is a thread's latest that was read
    within `reading_once()` and not read again since (nor written: `forget_reads`)."""
    reads, key = _unconsumed_reads.get(), _latest_key(config)
    if reads is None or key is None:
        return await read()
    if key in reads:
        return reads.pop(key)
    found = await read()
    reads[key] = _fresh(found)
    return found


def forget_reads() -> None:
    """A write of the saver's: what was read may be stale now."""
    reads = _unconsumed_reads.get()
    if reads:
        reads.clear()


# Within `holding_saves(thread)`: the saver's writes of that thread, kept back to be written in
# the transaction of the run's next write (`write_saves`) rather than in one each.
_held: ContextVar[HeldSaves | None] = ContextVar("held_checkpoint_saves", default=None)


@dataclass(frozen=True)
class SaverCall:
    """One of the saver's writes as LangGraph asked for it: `put` or `put_writes`, and its
    arguments."""

    method: Literal["put", "put_writes"]
    args: tuple[Any, ...]

    def apply(self, saver: BaseCheckpointSaver[Any]) -> None:
        """Make the call on a synchronous saver."""
        getattr(saver, self.method)(*self.args)


@dataclass(frozen=True)
class CheckpointSaves:
    """Held writes of the saver, taken to be written in a store transaction."""

    calls: tuple[SaverCall, ...]
    serde: SerializerProtocol

    def latest(self) -> CheckpointTuple | None:
        """What a read of the thread's latest checkpoint (its root namespace) answers once these
        saves are written, as LangGraph's savers assemble it, when they hold that checkpoint
        (the last one they put); None when they put none."""
        put = next((c for c in reversed(self.calls) if c.method == "put" and _root(c)), None)
        if put is None:
            return None
        config, checkpoint, metadata, _versions = put.args
        saved = _saved_config(config, checkpoint)
        parent_id = config["configurable"].get("checkpoint_id")
        parent: RunnableConfig | None = None
        if parent_id:
            parent = {"configurable": {**saved["configurable"], "checkpoint_id": parent_id}}
        # Keyed and ordered as the savers store and sort them (a write of special channels
        # replaces the one before it with its key, any other keeps the first), and their values
        # as the saver's serializer gives them back (a tuple comes back a list).
        writes: dict[tuple[str, str, int], tuple[str, str, Any]] = {}
        for call in self.calls:
            if call.method != "put_writes" or not _root(call):
                continue
            write_config, pairs, task_id, *rest = call.args
            if write_config["configurable"].get("checkpoint_id") != checkpoint["id"]:
                continue
            task_path = rest[0] if rest else ""
            replaces = all(channel in WRITES_IDX_MAP for channel, _ in pairs)
            for index, (channel, value) in enumerate(pairs):
                key = (task_path, task_id, WRITES_IDX_MAP.get(channel, index))
                if replaces or key not in writes:
                    writes[key] = (task_id, channel, self._as_stored(value))
        metadata = get_checkpoint_metadata(config, metadata)
        return CheckpointTuple(
            saved, checkpoint, metadata, parent, [writes[k] for k in sorted(writes)]
        )

    def _as_stored(self, value: Any) -> Any:
        return self.serde.loads_typed(self.serde.dumps_typed(value))


def _root(call: SaverCall) -> bool:
    """Whether the saver's call is for the thread's root namespace (not a subgraph's)."""
    return not (call.args[0].get("configurable") or {}).get("checkpoint_ns")


@dataclass(eq=False)
class HeldSaves:
    """The saver's writes of one thread, in the order LangGraph made them, not yet written."""

    thread_id: str
    calls: list[SaverCall] = field(default_factory=list)
    saver: HoldingSaver | None = None

    def keep(self, saver: HoldingSaver, call: SaverCall) -> None:
        self.saver = saver
        self.calls.append(call)

    def take(self) -> CheckpointSaves | None:
        """The writes held so far, to go with the caller's write; None when there are none."""
        if not self.calls or self.saver is None:
            return None
        taken = CheckpointSaves(tuple(self.calls), self.saver.serde)
        self.calls.clear()
        return taken

    async def release(self) -> None:
        """Write what is held now, in transactions of the saver's own."""
        if self.calls and self.saver is not None:
            calls = list(self.calls)
            self.calls.clear()
            await self.saver.save_now(calls)

    def keep_for_resume(self, saves: CheckpointSaves, mark: Hashable) -> None:
        """Once the write of `saves` has committed the run's pause: keep the checkpoint they
        hold for its resume in this process, which reads it (`resuming` under the same `mark`)
        without a trip to the database."""
        latest = saves.latest()
        if latest is not None and self.saver is not None:
            self.saver.keep_pause(self.thread_id, mark, latest)


# Within `resuming(thread, mark)`: the read of the thread's latest checkpoint is the one its
# saver kept at the run's pause under the same mark, if it kept one (`HoldingSaver.keep_pause`).
_resuming: ContextVar[tuple[str, Hashable] | None] = ContextVar("resuming", default=None)


@contextmanager
def resuming(thread_id: str, mark: Hashable) -> Iterator[None]:
    """Let the read of `thread_id`'s latest checkpoint be the one kept at its run's pause under
    `mark`: the caller knows that, kept under that mark, it is still the latest (no other
    execution can have written the thread since)."""
    token = _resuming.set((thread_id, mark))
    try:
        yield
    finally:
        _resuming.reset(token)


@asynccontextmanager
async def holding_saves(thread_id: str) -> AsyncIterator[HeldSaves]:
    """Within: the saver's checkpoints and writes of `thread_id` are held, and the caller writes
    them with its own next write (`HeldSaves.take`, then `write_saves` in that transaction). A
    read of the thread writes them first. Left when the block ends normally they are written
    then; when it raises they are dropped, as a crash would drop them."""
    held = HeldSaves(thread_id)
    token = _held.set(held)
    try:
        yield held
    finally:
        _held.reset(token)
    await held.release()


def _held_for(config: RunnableConfig) -> HeldSaves | None:
    held = _held.get()
    if held is None or str((config.get("configurable") or {}).get("thread_id")) != held.thread_id:
        return None
    return held


def _saved_config(config: RunnableConfig, checkpoint: Checkpoint) -> RunnableConfig:
    """What a saver's `put` answers: the configuration of the checkpoint it saved."""
    configurable = config["configurable"]
    return {
        "configurable": {
            "thread_id": configurable["thread_id"],
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": checkpoint["id"],
        }
    }


class HoldingSaver(BaseCheckpointSaver[str]):
    """LangGraph's async saver methods with Juru's rules: reads of a thread's latest
    checkpoint can be shared (`reading_once`), and writes can be held (`holding_saves`), so a
    read of a thread first writes what is held of it; and a run resumed in the process that
    paused it reads its checkpoint from memory (`resuming`). Each saver below says how to read
    and write at once (the `_..._now` methods)."""

    # The checkpoint of each paused run's thread, and the mark of its pause (`keep_pause`).
    _kept_pauses: OrderedDict[str, tuple[Hashable, CheckpointTuple]] | None = None

    async def _get_tuple_now(self, config: RunnableConfig) -> CheckpointTuple | None:
        raise NotImplementedError

    def _list_now(
        self, config: RunnableConfig | None, **options: Any
    ) -> AsyncIterator[CheckpointTuple]:
        """`list(config, filter=..., before=..., limit=...)` at once."""
        raise NotImplementedError

    async def _delta_history_now(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        raise NotImplementedError

    async def _put_now(self, *args: Any) -> RunnableConfig:
        """`put(config, checkpoint, metadata, new_versions)` at once."""
        raise NotImplementedError

    async def _put_writes_now(self, *args: Any) -> None:
        """`put_writes(config, writes, task_id, task_path)` at once."""
        raise NotImplementedError

    async def _delete_thread_now(self, thread_id: str) -> None:
        raise NotImplementedError

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        await self._release_held(config)
        return await read_once(config, lambda: self._kept_or_read(config))

    async def _kept_or_read(self, config: RunnableConfig) -> CheckpointTuple | None:
        kept = self._kept_for(config)
        return kept if kept is not None else await self._get_tuple_now(config)

    def keep_pause(self, thread_id: str, mark: Hashable, latest: CheckpointTuple) -> None:
        """Keep `latest`, the thread's latest checkpoint as its paused run's write committed
        it, for one read within `resuming(thread_id, mark)`; for `PAUSES_KEPT` threads at most."""
        if self._kept_pauses is None:
            self._kept_pauses = OrderedDict()
        self._kept_pauses[thread_id] = (mark, latest)
        self._kept_pauses.move_to_end(thread_id)
        while len(self._kept_pauses) > PAUSES_KEPT:
            self._kept_pauses.popitem(last=False)

    def _kept_for(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The kept checkpoint that `config` reads, if it names the latest of a thread being
        resumed under the mark it was kept with (once: it is then dropped)."""
        now_resuming = _resuming.get()
        if now_resuming is None or not self._kept_pauses:
            return None
        thread_id, mark = now_resuming
        if _latest_key(config) != (thread_id, ""):
            return None
        kept = self._kept_pauses.pop(thread_id, None)
        if kept is None or kept[0] != mark:
            return None
        return _fresh(kept[1])

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        await self._release_held(config)
        async for item in self._list_now(config, filter=filter, before=before, limit=limit):
            yield item

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        await self._release_held(config)
        return await self._delta_history_now(config, channels)

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        forget_reads()
        args = (config, checkpoint, metadata, new_versions)
        if self._hold(config, SaverCall("put", args)):
            return _saved_config(config, checkpoint)
        return await self._put_now(*args)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        forget_reads()
        args = (config, writes, task_id, task_path)
        if not self._hold(config, SaverCall("put_writes", args)):
            await self._put_writes_now(*args)

    async def adelete_thread(self, thread_id: str) -> None:
        forget_reads()
        if self._kept_pauses:
            self._kept_pauses.pop(thread_id, None)
        await self._release_held(None)
        await self._delete_thread_now(thread_id)

    async def save_now(self, calls: Sequence[SaverCall]) -> None:
        """Write held calls at once, in transactions of the saver's own."""
        for call in calls:
            if call.method == "put":
                await self._put_now(*call.args)
            else:
                await self._put_writes_now(*call.args)

    async def _release_held(self, config: RunnableConfig | None) -> None:
        held = _held.get() if config is None else _held_for(config)
        if held is not None:
            await held.release()

    def _hold(self, config: RunnableConfig, call: SaverCall) -> bool:
        held = _held_for(config)
        if held is None:
            return False
        held.keep(self, call)
        return True


class _SqliteSaverInTransaction(SqliteSaver):
    """LangGraph's SQLite saver on a connection whose transaction its owner commits."""

    def __init__(self, conn: sqlite3.Connection, serde: SerializerProtocol) -> None:
        super().__init__(conn, serde=serde)
        self.is_setup = True

    @contextmanager
    def cursor(self, transaction: bool = True) -> Iterator[sqlite3.Cursor]:
        cursor = self.conn.cursor()
        try:
            yield cursor
        finally:
            cursor.close()


class _PostgresSaverInTransaction(SyncPostgresSaver):
    """LangGraph's PostgreSQL saver on a connection in a transaction its owner commits, its
    statements sent like the transaction's others: inside the write's pipeline when it has one
    (`store.transactions.sent_together`), with no pipeline or sync of their own."""

    @contextmanager
    def _cursor(self, *, pipeline: bool = False) -> Iterator[Cursor[DictRow]]:
        assert isinstance(self.conn, PsycopgConnection), "made with a connection, not a pool"
        with self.conn.cursor(binary=True, row_factory=dict_row) as cursor:
            yield cursor


def write_saves(connection: Connection, saves: CheckpointSaves) -> None:
    """The held writes of the saver, made by LangGraph's own saver code on `connection`, inside
    its transaction: they commit with it, or not at all. They read no result, so they may go
    in a block of statements sent together."""
    driver = connection.connection.driver_connection
    assert driver is not None, "a connection inside a transaction has its driver's"
    saver: BaseCheckpointSaver[Any]
    if connection.dialect.name == "sqlite":
        saver = _SqliteSaverInTransaction(driver, saves.serde)
    else:
        saver = _PostgresSaverInTransaction(driver, serde=saves.serde)
    for call in saves.calls:
        call.apply(saver)


class ThreadedSqliteSaver(HoldingSaver, SqliteSaver):
    """LangGraph's SQLite saver with its async methods run in the database's threads: reads in
    the reader threads, writes in the writer thread under the file's write lock (so they queue
    with the store's writes and never hold the lock across turns of the event loop). Every
    call runs to its end in its thread, so a cancelled caller leaves no transaction open."""

    def __init__(self, conn: sqlite3.Connection, writer: SqliteWriter, reader: ThreadedReader):
        super().__init__(conn)
        self._writer, self._reader = writer, reader

    async def _get_tuple_now(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._reader.call(self.get_tuple, config)

    async def _list_now(
        self, config: RunnableConfig | None, **options: Any
    ) -> AsyncIterator[CheckpointTuple]:
        def read() -> list[CheckpointTuple]:
            return list(self.list(config, **options))

        for item in await self._reader.call(read):
            yield item

    async def _delta_history_now(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        def read() -> Mapping[str, Any]:
            return self.get_delta_channel_history(config=config, channels=channels)

        return await self._reader.call(read)

    async def _put_now(self, *args: Any) -> RunnableConfig:
        return await self._writer.call(self.put, *args)

    async def _put_writes_now(self, *args: Any) -> None:
        await self._writer.call(self.put_writes, *args)

    async def _delete_thread_now(self, thread_id: str) -> None:
        await self._writer.call(self.delete_thread, thread_id)

    def close(self) -> None:
        """Close the connection once no call is using it: a write whose caller was cancelled
        may still be running in the writer thread, and closing a `sqlite3` connection under a
        statement in another thread crashes the process."""
        with self.lock:
            self.conn.close()


def _sqlite_connection(database: DatabaseUrl, busy_timeout_ms: int) -> sqlite3.Connection:
    # Used by the reader threads and the writer thread in turn (the saver's lock orders them).
    connection = sqlite3.connect(database.sqlite_path, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    return connection


class PostgresSaver(HoldingSaver, AsyncPostgresSaver):
    """LangGraph's PostgreSQL saver under Juru's rules of reading and writing (`HoldingSaver`)."""

    async def _get_tuple_now(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await AsyncPostgresSaver.aget_tuple(self, config)

    async def _list_now(
        self, config: RunnableConfig | None, **options: Any
    ) -> AsyncIterator[CheckpointTuple]:
        async for item in AsyncPostgresSaver.alist(self, config, **options):
            yield item

    async def _delta_history_now(
        self, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, Any]:
        return await AsyncPostgresSaver.aget_delta_channel_history(
            self, config=config, channels=channels
        )

    async def _put_now(self, *args: Any) -> RunnableConfig:
        return await AsyncPostgresSaver.aput(self, *args)

    async def _put_writes_now(self, *args: Any) -> None:
        await AsyncPostgresSaver.aput_writes(self, *args)

    async def _delete_thread_now(self, thread_id: str) -> None:
        await AsyncPostgresSaver.adelete_thread(self, thread_id)


class IdleConnectionCheck:
    """The pool's connection check, made only for connections idle a while: one the server
    closed while it sat in the pool (a restart, an outage) is replaced before LangGraph gets it,
    without a round trip before every one of the saver's calls (each is a transaction)."""

    def __init__(self, after_seconds: float = PING_AFTER_IDLE_SECONDS) -> None:
        self.after_seconds = after_seconds
        self._returned: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    async def returned(self, connection: AsyncConnection[Any]) -> None:
        self._returned[connection] = time.monotonic()

    async def check(self, connection: AsyncConnection[Any]) -> None:
        returned = self._returned.get(connection)
        if returned is None or time.monotonic() - returned >= self.after_seconds:
            await AsyncConnectionPool.check_connection(connection)


# The PostgreSQL saver's set-up is one process's at a time. The lock is tried, not waited for:
# a session waiting for it would be a transaction that the migrations' concurrent index builds
# wait for in turn (a deadlock).
SETUP_LOCK = "SELECT pg_try_advisory_lock(hashtext('juru:checkpointer-setup')) AS taken"
SETUP_LOCK_RETRY_SECONDS = 0.05
# Every connection of the PostgreSQL saver: each statement prepared on the server at its first
# use (psycopg's `prepare_threshold=0`, as LangGraph's saver is documented), rows as dicts.
POSTGRES_OPTIONS: dict[str, Any] = {"prepare_threshold": 0, "row_factory": dict_row}


async def _set_up_postgres_saver(database: DatabaseUrl) -> None:
    """Apply LangGraph's migrations of the PostgreSQL saver, outside a transaction (they build
    indexes concurrently), holding the set-up lock. Processes that start at once (replicas on
    a new database) would otherwise apply the same migration together: one would fail on the
    version the other recorded, or two index builds would deadlock and leave an invalid index
    that the next start skips. Closing the connection releases the lock."""
    async with await AsyncConnection.connect(
        database.libpq_dsn(), autocommit=True, **POSTGRES_OPTIONS
    ) as connection:
        while True:
            taken = await (await connection.execute(SETUP_LOCK)).fetchone()
            if taken is not None and taken["taken"]:
                break
            await asyncio.sleep(SETUP_LOCK_RETRY_SECONDS)
        await AsyncPostgresSaver(connection).setup()


async def set_up_saver(database: DatabaseUrl) -> None:
    """Create or migrate the saver's tables, as `open_checkpointer` does (for a process that
    sets the database up before the processes that use it start)."""
    if database.is_sqlite:
        connection = _sqlite_connection(database, SQLITE_BUSY_TIMEOUT_MS)
        try:
            SqliteSaver(connection).setup()
        finally:
            connection.close()
        return
    await _set_up_postgres_saver(database)


@asynccontextmanager
async def open_checkpointer(
    database: DatabaseUrl,
    engine: Database | None = None,
    busy_timeout_ms: int = SQLITE_BUSY_TIMEOUT_MS,
) -> AsyncIterator[BaseCheckpointSaver[str]]:
    """Open (and set up) the SQLite or PostgreSQL saver for `database`.

    On SQLite the saver runs in the threads of `engine` (the same file's `Database`; one is
    opened for the saver alone when none is given).
    """
    if database.is_sqlite:
        async with _sqlite_threads(database, engine, busy_timeout_ms) as (writer, reader):
            connection = await asyncio.to_thread(_sqlite_connection, database, busy_timeout_ms)
            saver = ThreadedSqliteSaver(connection, writer, reader)
            try:
                await writer.call(saver.setup)
                yield saver
            finally:
                await reader.call(saver.close)
        return
    await _set_up_postgres_saver(database)
    # Without autocommit each of the saver's calls is one transaction (the pool commits when
    # the saver gives the connection back), not one per statement.
    idle_check = IdleConnectionCheck()
    pool = AsyncConnectionPool(
        database.libpq_dsn(),
        min_size=1,
        max_size=POSTGRES_POOL_MAX,
        open=False,
        # A connection that a database restart broke is replaced, not handed to LangGraph.
        check=idle_check.check,
        reset=idle_check.returned,
        kwargs={"autocommit": False, **POSTGRES_OPTIONS},
    )
    async with pool:
        yield PostgresSaver(pool)


@asynccontextmanager
async def _sqlite_threads(
    database: DatabaseUrl, engine: Database | None, busy_timeout_ms: int
) -> AsyncIterator[tuple[SqliteWriter, ThreadedReader]]:
    if engine is not None:
        assert isinstance(engine.writer, SqliteWriter)
        yield engine.writer, engine.reader
        return
    own = open_database(database, busy_timeout_ms)
    assert isinstance(own.writer, SqliteWriter)
    try:
        yield own.writer, own.reader
    finally:
        await own.dispose()
