"""The RunEvents contract, run against every implementation: in-process (`LocalRunEvents`),
between the processes of a SQLite database (`SocketRunEvents`) and over PostgreSQL
LISTEN/NOTIFY (`PostgresRunEvents`).

Each case opens two instances as two processes would; the in-process kind has only one, so
there "the other process" is the same instance. The sockets run twice: once sending every
notice from the event loop, once with the first instance's writes sending theirs from the
SQLite writer's thread as they commit (`SocketRunEvents.send_from_writer`).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Connection

from juru.engine import events as events_module
from juru.engine.events import (
    CHANNEL,
    MAX_NOTICE_BYTES,
    WORK,
    LocalRunEvents,
    PostgresRunEvents,
    RunEvents,
    changed_to,
    handed_to,
    lease_moved,
    log_grew,
)
from juru.engine.socket_events import SocketRunEvents, events_directory
from juru.store.database import Database, open_database
from juru.store.run_log import RunEventRecord, append_to_logs
from juru.store.transactions import write
from juru.store.urls import DatabaseUrl

WAKE_SECONDS = 10.0
Pair = tuple[RunEvents, RunEvents]
# The database whose writes send an instance's notices (the "writer" kind), by instance.
WRITERS: dict[int, Database] = {}


@pytest.fixture(
    params=[
        pytest.param("local", id="local"),
        pytest.param("socket", id="sqlite-socket"),
        pytest.param("writer", id="sqlite-writer"),
        pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgresql),
    ]
)
def backend(request: pytest.FixtureRequest) -> tuple[str, str]:
    """The kind of events and, for PostgreSQL, the DSN of a fresh database."""
    if request.param != "postgresql":
        return request.param, ""
    url: str = request.getfixturevalue("fresh_postgres_url")
    return request.param, DatabaseUrl.parse(url).libpq_dsn()


@pytest.fixture
async def pair(backend: tuple[str, str], tmp_path: Path) -> AsyncIterator[Pair]:
    """Two started instances that share one backing channel (the API and a worker)."""
    kind, dsn = backend
    make: Callable[[], RunEvents]
    if kind == "local":
        local = LocalRunEvents()
        await local.start()
        yield local, local
        await local.stop()
        return
    databases: list[Database] = []
    if kind in ("socket", "writer"):
        directory = events_directory(tmp_path / "juru.db")
        make = lambda: SocketRunEvents(directory)  # noqa: E731
    else:
        make = lambda: PostgresRunEvents(dsn)  # noqa: E731
    first, second = make(), make()
    if kind == "writer":
        # Each process has its own handle on the one file.
        for events in (first, second):
            assert isinstance(events, SocketRunEvents)
            database = open_database(DatabaseUrl.parse(f"sqlite:///{tmp_path / 'juru.db'}"))
            events.send_from_writer(database)
            WRITERS[id(events)] = database
            databases.append(database)
    await first.start()
    await second.start()
    try:
        yield first, second
    finally:
        await first.stop()
        await second.stop()
        for events, database in zip((first, second), databases, strict=False):
            del WRITERS[id(events)]
            await database.dispose()


async def test_a_publish_wakes_the_watchers_of_that_run_only(pair: Pair) -> None:
    api, worker = pair
    async with api.watch("run_a") as a, api.watch("run_b") as b, worker.watch("run_a") as own:
        await worker.publish("run_a")
        await asyncio.wait_for(a.wait(), WAKE_SECONDS)
        await asyncio.wait_for(own.wait(), WAKE_SECONDS)
        # Events arrive in order: once run_c's is in, anything for run_b would have been too.
        async with api.watch("run_c") as c:
            await worker.publish("run_c")
            await asyncio.wait_for(c.wait(), WAKE_SECONDS)
        assert not b.is_set()


async def test_announced_work_wakes_a_waiting_worker(pair: Pair) -> None:
    api, worker = pair
    waiting = asyncio.create_task(worker.wait_for_work(60))
    await asyncio.sleep(0)  # let the task start waiting (no timing: it only yields once)
    await api.announce_work()
    await asyncio.wait_for(waiting, WAKE_SECONDS)


async def test_work_announced_before_the_wait_is_not_lost(pair: Pair) -> None:
    api, worker = pair
    async with worker.watch("run_marker") as marker:
        await api.announce_work()
        await api.publish("run_marker")
        await asyncio.wait_for(marker.wait(), WAKE_SECONDS)
    await asyncio.wait_for(worker.wait_for_work(60), WAKE_SECONDS)


async def test_waiting_for_work_returns_after_its_timeout(pair: Pair) -> None:
    _, worker = pair
    await worker.wait_for_work(0)  # a listener that just started wakes its worker once
    assert not await asyncio.wait_for(worker.wait_for_work(0.01), WAKE_SECONDS)


async def work_heard_after(backend: tuple[str, str], pair: Pair, payload: str) -> bool:
    """Whether the worker's process heard of work once `payload` reached it (a marker sent
    after it in the same commit arrives after it)."""
    api, worker = pair
    await worker.wait_for_work(0)  # forget any earlier announcement
    async with worker.watch("run_marker") as marker:
        await commit_with(backend, api, payload, "run_marker")
        await asyncio.wait_for(marker.wait(), WAKE_SECONDS)
    return await worker.wait_for_work(0)


async def test_work_for_any_worker_wakes_every_process(
    pair: Pair, backend: tuple[str, str]
) -> None:
    assert await work_heard_after(backend, pair, WORK)


Handed = tuple[str, dict[str, Any] | None]


class Taken(list[Handed]):
    """What a worker's process gives the runs handed to it (`HandOffs`), in order, and the
    runs it hears changed (`changes`, besides `handed_after`'s marker)."""

    def __init__(self) -> None:
        super().__init__()
        self.changes: list[str] = []

    def hand(self, run_id: str, carried: dict[str, Any] | None) -> None:
        self.append((run_id, carried))

    def changed(self, run_id: str) -> None:
        if run_id != "run_marker":
            self.changes.append(run_id)


async def handed_after(
    backend: tuple[str, str], pair: Pair, payload: str, taken: list[Handed]
) -> list[Handed]:
    """`taken` (what the worker's process gives the runs handed to it) once `payload` reached
    that process (a marker sent after it in the same commit arrives after it)."""
    api, worker = pair
    async with worker.watch("run_marker") as marker:
        await commit_with(backend, api, payload, "run_marker")
        await asyncio.wait_for(marker.wait(), WAKE_SECONDS)
    return taken


async def test_a_run_handed_to_a_worker_reaches_that_worker_only(
    pair: Pair, backend: tuple[str, str]
) -> None:
    _, worker = pair
    taken = Taken()
    await worker.wait_for_work(0)  # forget any earlier announcement
    with worker.serve_work("here/1", taken):
        assert await handed_after(backend, pair, handed_to("elsewhere/1", "run_a"), taken) == []
        assert await handed_after(backend, pair, handed_to("here/1", "run_b"), taken) == [
            ("run_b", None)
        ]
        # A run handed to it needs no claim: no worker of the process is asked to look.
        assert not await worker.wait_for_work(0)
    assert await handed_after(backend, pair, handed_to("here/1", "run_c"), taken) == [
        ("run_b", None)
    ]


async def test_a_handed_run_comes_as_its_notice_carried_it_where_it_fits(
    pair: Pair, backend: tuple[str, str]
) -> None:
    _, worker = pair
    taken = Taken()
    run = {"id": "run_d", "status": "running", "input": [{"role": "user", "content": "hai"}]}
    too_big = {**run, "id": "run_e", "input": [{"role": "user", "content": "x" * MAX_NOTICE_BYTES}]}
    with worker.serve_work("here/1", taken):
        await handed_after(backend, pair, handed_to("here/1", "run_d", run), taken)
        await handed_after(backend, pair, handed_to("here/1", "run_e", too_big), taken)
        # The changes of runs heard afterwards, status or lease, reach the worker too.
        await handed_after(backend, pair, "run_d", taken)
        await handed_after(backend, pair, lease_moved("run_e"), taken)
    # What would not fit in a notice is read by the worker instead.
    assert taken == [("run_d", run), ("run_e", None)]
    assert taken.changes == ["run_d", "run_e"]


async def test_what_a_process_hears_of_a_run_it_writes_comes_after_the_writes_notices(
    pair: Pair, backend: tuple[str, str]
) -> None:
    if backend[0] == "local":
        pytest.skip("one process: it hears nothing from another")
    api, worker = pair
    async with api.follow("run_w") as follower:
        assert follower.take() == [None]
        with api.writing("run_w"):
            # The worker the write woke streams its call before the write's notices are
            # delivered here (a marker sent after the delta shows that it arrived).
            await worker.publish_delta("run_w", {"delta": "hai"})
            async with api.watch("run_marker") as marker:
                await worker.publish("run_marker")
                await asyncio.wait_for(marker.wait(), WAKE_SECONDS)
            assert follower.take() == []
            await api.committed("run_w")
        # The write's change first (its log is read), then what was heard meanwhile.
        assert follower.take() == [None, {"delta": "hai"}]
        follower.wake.clear()
        await worker.publish_delta("run_w", {"delta": " lagi"})
        await asyncio.wait_for(follower.wake.wait(), WAKE_SECONDS)
        assert follower.take() == [{"delta": " lagi"}]


async def test_a_closed_watch_is_not_woken(pair: Pair) -> None:
    api, worker = pair
    async with api.watch("run_x") as closed:
        pass
    async with api.watch("run_y") as later:
        await worker.publish("run_x")
        await worker.publish("run_y")
        await asyncio.wait_for(later.wait(), WAKE_SECONDS)
    assert not closed.is_set()


async def test_followers_are_woken_by_log_growth_and_get_deltas_watchers_are_not(
    pair: Pair,
) -> None:
    api, worker = pair
    own_process = worker.follow("run_f")
    async with api.follow("run_f") as follower, api.watch("run_f") as status, own_process as own:
        assert follower.take() == [None]  # it starts by reading the log
        follower.wake.clear()
        await worker.publish_log("run_f")
        await asyncio.wait_for(follower.wake.wait(), WAKE_SECONDS)
        assert follower.take() == [None]
        follower.wake.clear()
        await worker.publish_delta("run_f", {"message_id": "m1", "delta": "Halo, dunia ✓"})
        await worker.publish_log("run_f")
        await worker.publish_delta("run_f", {"message_id": "m2", "delta": "lagi"})
        await asyncio.wait_for(follower.wake.wait(), WAKE_SECONDS)
        async with api.watch("run_marker") as marker:
            await worker.publish("run_marker")
            await asyncio.wait_for(marker.wait(), WAKE_SECONDS)
        # In the order they were sent: a delta before the write it precedes.
        assert follower.take() == [
            {"message_id": "m1", "delta": "Halo, dunia ✓"},
            None,
            {"message_id": "m2", "delta": "lagi"},
        ]
        # A status change wakes both; the watcher saw nothing before it.
        assert not status.is_set()
        await worker.publish("run_f")
        await asyncio.wait_for(status.wait(), WAKE_SECONDS)
        # Each delta reached each follower once (a process does not hear its own notices twice).
        assert follower.take() == [None]  # the status change
        if api is not worker:
            deltas = [arrival for arrival in own.take() if arrival is not None]
            assert deltas == [
                {"message_id": "m1", "delta": "Halo, dunia ✓"},
                {"message_id": "m2", "delta": "lagi"},
            ]


async def test_a_lease_change_wakes_lease_watchers_only(pair: Pair) -> None:
    api, worker = pair
    follow, guard, status = api.follow("run_l"), api.watch("run_l", leases=True), api.watch("run_l")
    async with follow as follower, guard as lease_moved, status as status_changed:
        follower.take()
        follower.wake.clear()
        await worker.publish_lease("run_l")
        await asyncio.wait_for(lease_moved.wait(), WAKE_SECONDS)
        assert follower.take() == [] and not follower.wake.is_set()
        assert not status_changed.is_set()  # a `?wait=` has nothing to read again
        lease_moved.clear()
        await worker.publish("run_l")  # a status change reaches every watcher
        await asyncio.wait_for(status_changed.wait(), WAKE_SECONDS)
        await asyncio.wait_for(lease_moved.wait(), WAKE_SECONDS)


async def commit_with(backend: tuple[str, str], sender: RunEvents, *payloads: str) -> None:
    """What a write does with `payloads`: its notices go out with its commit (on PostgreSQL, a
    NOTIFY of its own transaction), then the sender is told that it committed."""
    notices = sender.notices(*payloads)
    if backend[0] == "writer":
        assert notices, "a process bound to its writer has its writes send the notices"
        now = datetime.now(UTC)
        await write(WRITERS[id(sender)], lambda c: append_to_logs(c, [], now, notices))
    elif notices:
        connecting = psycopg.AsyncConnection.connect(backend[1], autocommit=True)
        async with await connecting as sending, sending.transaction():
            for channel, payload in notices:
                await sending.execute("SELECT pg_notify(%s, %s)", (channel, payload))
    await sender.committed(*payloads)


async def test_a_change_can_carry_the_run_as_it_left_it(
    pair: Pair, backend: tuple[str, str]
) -> None:
    api, worker = pair
    state: dict[str, object] = {"id": "run_s", "status": "requires_action", "n": 2, "note": ""}
    # As large as a notice carries: every transport must take it whole.
    room = MAX_NOTICE_BYTES - len(changed_to("run_s", state).encode())
    state["note"] = "Halo, dunia ✓ " + "x" * (room - len("Halo, dunia ✓ ".encode()))
    assert len(changed_to("run_s", state).encode()) == MAX_NOTICE_BYTES
    async with api.watch("run_s") as changed, api.follow("run_s") as follower:
        follower.take()
        follower.wake.clear()
        await commit_with(backend, worker, changed_to("run_s", state))
        await asyncio.wait_for(changed.wait(), WAKE_SECONDS)
        assert changed.state == state
        await asyncio.wait_for(follower.wake.wait(), WAKE_SECONDS)
        assert follower.take() == [None]  # its log may have grown: the stream reads it
        assert follower.state == state
        changed.clear()
        # A later change that carries nothing: the state is no longer the run's.
        await commit_with(backend, worker, "run_s")
        await asyncio.wait_for(changed.wait(), WAKE_SECONDS)
        assert changed.state is None
        assert follower.state is None


async def test_a_stream_alone_hears_the_carried_state(pair: Pair, backend: tuple[str, str]) -> None:
    api, worker = pair
    state = {"id": "run_f", "status": "requires_action", "step_count": 3}
    async with api.follow("run_f") as follower:
        follower.take()
        follower.wake.clear()
        await commit_with(backend, worker, changed_to("run_f", state))
        await asyncio.wait_for(follower.wake.wait(), WAKE_SECONDS)
        assert follower.take() == [None]
        assert follower.state == state


def step_record(run_id: str, seq: int, note: str = "") -> RunEventRecord:
    data = {"step_count": seq, "cost_rupiah": "12.5", "note": note}
    return RunEventRecord(run_id, seq, "step.completed", data, datetime(2026, 12, 4, tzinfo=UTC))


async def test_a_change_and_a_log_growth_can_carry_the_events_they_appended(
    pair: Pair, backend: tuple[str, str]
) -> None:
    api, worker = pair
    third, fourth = step_record("run_e", 3, "Halo ✓"), step_record("run_e", 4)
    async with api.watch("run_e") as changed, api.follow("run_e") as follower:
        # A read of the log is still to come: it will see whatever a notice carries.
        await commit_with(backend, worker, log_grew("run_e", [third]))
        await asyncio.wait_for(follower.wake.wait(), WAKE_SECONDS)
        assert follower.take() == [None]
        follower.wake.clear()
        await commit_with(backend, worker, log_grew("run_e", [third]))
        await asyncio.wait_for(follower.wake.wait(), WAKE_SECONDS)
        assert follower.take() == [[third]]
        assert not changed.is_set()  # the log grew, the run did not change
        follower.wake.clear()
        state = {"id": "run_e", "status": "requires_action"}
        await commit_with(backend, worker, changed_to("run_e", state, [third, fourth]))
        await asyncio.wait_for(follower.wake.wait(), WAKE_SECONDS)
        assert follower.take() == [[third, fourth]]
        assert follower.state == state
        await asyncio.wait_for(changed.wait(), WAKE_SECONDS)
        assert changed.state == state


def test_events_too_large_for_a_notice_are_left_out_and_the_state_kept() -> None:
    state = {"id": "run_t", "status": "succeeded"}
    large = [step_record("run_t", 5, "é" * (MAX_NOTICE_BYTES // 2))]
    assert changed_to("run_t", state, large) == changed_to("run_t", state)
    assert log_grew("run_t", large) == log_grew("run_t") == "+run_t"
    small = [step_record("run_t", 5)]
    assert '"events":' in changed_to("run_t", state, small)
    assert log_grew("run_t", small).startswith("+run_t [")


def test_a_state_too_large_for_every_transport_is_not_carried() -> None:
    fits = {"id": "run_t", "output": "x" * (MAX_NOTICE_BYTES - 100)}
    assert changed_to("run_t", fits).startswith("#run_t {")
    too_large = {"id": "run_t", "output": "é" * (MAX_NOTICE_BYTES // 2)}  # two bytes each
    assert changed_to("run_t", too_large) == "run_t"


async def test_a_follower_in_one_process_makes_the_run_followed_in_the_other(
    pair: Pair,
) -> None:
    api, worker = pair
    assert not worker.followed("run_g")
    async with api.follow("run_g"):
        async with worker.watch("run_marker") as marker:
            await api.publish("run_marker")  # sent after the follow's notice, so it came first
            await asyncio.wait_for(marker.wait(), WAKE_SECONDS)
        assert worker.followed("run_g") and api.followed("run_g")
    assert not worker.followed("run_h")


@pytest.mark.parametrize(
    "backend",
    [
        pytest.param("socket", id="sqlite-socket"),
        pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgresql),
    ],
    indirect=True,
)
async def test_a_process_that_starts_later_hears_which_runs_are_followed(
    backend: tuple[str, str], tmp_path: Path
) -> None:
    kind, dsn = backend
    directory = events_directory(tmp_path / "juru.db")

    def make() -> RunEvents:
        return SocketRunEvents(directory) if kind == "socket" else PostgresRunEvents(dsn)

    api = make()
    await api.start()
    try:
        async with api.follow("run_early"):
            worker = make()  # a worker process started after the stream opened
            await worker.start()
            try:
                for _ in range(500):
                    if worker.followed("run_early"):
                        break
                    await asyncio.sleep(0.01)  # polling against a deadline
                assert worker.followed("run_early")
            finally:
                await worker.stop()
    finally:
        await api.stop()


async def test_sockets_left_by_killed_processes_are_skipped_and_removed(tmp_path: Path) -> None:
    directory = events_directory(tmp_path / "juru.db")
    events = SocketRunEvents(directory)
    await events.start()
    try:
        # A killed process leaves its bound socket's file behind, with nobody reading it.
        dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        dead.bind(str(directory / "1-deadbeef.sock"))
        dead.close()
        async with events.watch("run_a") as changed:
            await events.publish("run_a")
            assert changed.is_set()
        assert not (directory / "1-deadbeef.sock").exists()
    finally:
        await events.stop()
    assert events.path is not None and not events.path.exists()


@pytest.mark.postgresql
async def test_a_postgresql_listener_stops_at_once_and_closes_its_connections(
    fresh_postgres_url: str,
) -> None:
    dsn = DatabaseUrl.parse(fresh_postgres_url).libpq_dsn()
    api, worker, third = (PostgresRunEvents(dsn) for _ in range(3))
    for events in (api, worker, third):
        await events.start()
    try:
        before = await listening_backends(dsn)
        await asyncio.wait_for(worker.stop(), timeout=events_module.STOP_SECONDS)
        # The closed connection's backend leaves `pg_stat_activity` once it has exited.
        assert await listening_backends(dsn, expected=before - 1) == before - 1
        async with api.watch("run_marker") as marker:
            await third.publish("run_marker")  # the others still hear each other
            await asyncio.wait_for(marker.wait(), timeout=10)
    finally:
        await asyncio.wait_for(api.stop(), timeout=10)
        await asyncio.wait_for(third.stop(), timeout=10)


async def listening_backends(dsn: str, expected: int | None = None) -> int:
    """Connections of the database that are waiting on a LISTEN of the run events; with
    `expected`, counted again until they are that many or 10 s have passed (a backend whose
    client closed its connection is listed until its process has exited)."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as connection:
        for _ in range(1000):
            cursor = await connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND query = %s",
                (f"LISTEN {CHANNEL}",),
            )
            row = await cursor.fetchone()
            assert row is not None
            if expected is None or int(row[0]) == expected:
                break
            await asyncio.sleep(0.01)  # polling against a deadline
    return int(row[0])


@pytest.mark.postgresql
async def test_a_writes_notices_arrive_in_order_at_its_commit_and_never_after_a_rollback(
    fresh_postgres_url: str,
) -> None:
    database = open_database(DatabaseUrl.parse(fresh_postgres_url))
    listener = await psycopg.AsyncConnection.connect(
        DatabaseUrl.parse(fresh_postgres_url).libpq_dsn(), autocommit=True
    )

    now = datetime.now(UTC)

    def sends(*payloads: str) -> Callable[[Connection], None]:
        """A write sending `payloads` as the statement that appends its events sends them."""
        return lambda c: append_to_logs(c, [], now, [("juru_test", p) for p in payloads])

    def fails(connection: Connection) -> None:
        sends("lost", "lost too")(connection)
        raise RuntimeError("rolled back")

    try:
        await listener.execute("LISTEN juru_test")
        await write(database, sends("one"))
        await write(database, sends("two", "three", "four"))
        with pytest.raises(RuntimeError):
            await write(database, fails)
        await write(database, sends("five", "six"))
        received = [
            notice.payload async for notice in listener.notifies(timeout=WAKE_SECONDS, stop_after=6)
        ]
        assert received == ["one", "two", "three", "four", "five", "six"]
    finally:
        await listener.close()
        await database.dispose()


@pytest.mark.postgresql
async def test_a_postgresql_listener_whose_connection_is_cut_listens_again(
    fresh_postgres_url: str,
) -> None:
    dsn = DatabaseUrl.parse(fresh_postgres_url).libpq_dsn()
    api, worker = PostgresRunEvents(dsn), PostgresRunEvents(dsn)
    for events in (api, worker):
        await events.start()
    try:
        async with api.watch("run_cut") as cut, worker.watch("run_cut") as also_cut:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as admin:
                await admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND query = %s",
                    (f"LISTEN {CHANNEL}",),
                )
            # Back on a new connection, each listener wakes every watcher of its process:
            # anything may have happened meanwhile. Both listeners reconnect on their own
            # time; the worker's wake says its LISTEN is back too.
            await asyncio.wait_for(cut.wait(), WAKE_SECONDS)
            await asyncio.wait_for(also_cut.wait(), WAKE_SECONDS)
            cut.clear()
            await worker.publish("run_cut")
            await asyncio.wait_for(cut.wait(), WAKE_SECONDS)
        assert await listening_backends(dsn, expected=2) == 2
    finally:
        await asyncio.wait_for(api.stop(), timeout=10)
        await asyncio.wait_for(worker.stop(), timeout=10)


async def test_a_sqlite_writes_notices_leave_from_its_writer_in_order_and_only_once_committed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "juru.db"
    directory = events_directory(path)
    database = open_database(DatabaseUrl.parse(f"sqlite:///{path}"))
    events = SocketRunEvents(directory)
    events.send_from_writer(database)
    await events.start()
    # Another process's socket, read as it stands.
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(directory / "2-listener.sock"))
    listener.setblocking(False)
    now = datetime.now(UTC)
    loop = asyncio.get_running_loop()

    def sends(*payloads: str) -> Callable[[Connection], None]:
        """A write sending `payloads` as the statement that appends its events sends them."""
        return lambda c: append_to_logs(c, [], now, events.notices(*payloads))

    def fails(connection: Connection) -> None:
        sends("lost", "lost too")(connection)
        raise RuntimeError("rolled back")

    try:
        await write(database, sends("one"))
        await write(database, sends("two", "three", "four"))
        with pytest.raises(RuntimeError):
            await write(database, fails)
        # Tried without the sync, then rolled back and run again with it: sent once.
        await write(database, sends("five"), unsynced_if=lambda _: False)
        await write(database, sends("six"))
        received = [
            (await asyncio.wait_for(loop.sock_recv(listener, 4096), WAKE_SECONDS)).decode()
            for _ in range(6)
        ]
        assert received == ["one", "two", "three", "four", "five", "six"]
        with pytest.raises(BlockingIOError):
            listener.recv(4096)  # and nothing more
    finally:
        listener.close()
        await events.stop()
        await database.dispose()


async def test_datagrams_for_a_peer_with_a_full_queue_wait_for_it_in_order(
    tmp_path: Path,
) -> None:
    directory = events_directory(tmp_path / "juru.db")
    events = SocketRunEvents(directory)
    await events.start()
    # A process that reads nothing for a while: its queue fills.
    slow = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    slow.bind(str(directory / "2-slow.sock"))
    slow.setblocking(False)
    loop = asyncio.get_running_loop()
    sent = [f"run_{number}" for number in range(2000)]
    try:
        for payload in sent:
            await events.publish(payload)
        assert events._backlogs, "the queue filled: some datagrams wait"
        received = [
            (await asyncio.wait_for(loop.sock_recv(slow, 4096), WAKE_SECONDS)).decode()
            for _ in sent
        ]
        assert received == sent
    finally:
        slow.close()
        await events.stop()
