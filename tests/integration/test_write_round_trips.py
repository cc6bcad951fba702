"""A write on PostgreSQL waits for the server only at a statement whose result it reads
(`store.database.ThreadedWriter`): its BEGIN goes with its first statement, the statements
whose results nobody reads (`sent_together`, `sending_later`) with the next one or with the
COMMIT. Counted as the server's ReadyForQuery messages in the protocol trace of each write's
connection (one per round trip)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from psycopg import pq
from sqlalchemy import Connection, event, func, select

from juru.store.database import Database
from juru.store.tables import playground_threads
from juru.store.transactions import sent_together, write
from tests.integration.test_run_engine import OPENAI_MODEL, WEATHER_CALL
from tests.integration.test_sent_together import insert_thread, stored_threads
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import HostedHarness

pytestmark = pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)


@contextmanager
def write_round_trips(database: Database, folder: Path) -> Iterator[list[int]]:
    """The round trips of each write transaction of `database` that ends while the block runs,
    in the order the writes took their connections (one checkout of a writer's connection is
    one transaction); read when the block ends."""
    engine = database.writer.engine
    traces: list[Path] = []
    open_files: dict[int, Any] = {}

    def traced(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        trace = folder / f"write-{len(traces):03d}.trace"
        traces.append(trace)
        stream = trace.open("w")
        open_files[id(dbapi_connection)] = stream
        dbapi_connection.pgconn.trace(stream.fileno())
        dbapi_connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)

    def untraced(dbapi_connection: Any, _record: Any) -> None:
        stream = open_files.pop(id(dbapi_connection), None)
        if stream is not None:
            dbapi_connection.pgconn.untrace()
            stream.close()

    counts: list[int] = []
    event.listen(engine, "checkout", traced)
    event.listen(engine, "checkin", untraced)
    try:
        yield counts
    finally:
        event.remove(engine, "checkout", traced)
        event.remove(engine, "checkin", untraced)
    for trace in traces:
        # A message's line: direction, length, its type (a query's text may go on below it).
        lines = [line.split() for line in trace.read_text().splitlines()]
        counts.append(sum(1 for words in lines if words[2:3] == ["ReadyForQuery"]))


async def test_a_write_waits_for_the_server_only_where_it_reads(
    store_database: Database, tmp_path: Path
) -> None:
    def work(connection: Connection) -> int:
        with sent_together(connection):
            insert_thread(connection, "a")
        # BEGIN, the insert and this read go out together: the read sees the insert.
        seen = connection.execute(select(func.count()).select_from(playground_threads)).scalar()
        with sent_together(connection):
            insert_thread(connection, "b")
        return int(seen or 0)

    with write_round_trips(store_database, tmp_path) as round_trips:
        seen = await write(store_database, work)
    assert seen == 1
    assert round_trips == [2]  # [BEGIN, insert a, the read], [insert b, COMMIT]
    assert await stored_threads(store_database) == ["a", "b"]


async def test_a_write_that_reads_nothing_takes_one_round_trip(
    store_database: Database, tmp_path: Path
) -> None:
    def work(connection: Connection) -> None:
        with sent_together(connection):
            insert_thread(connection, "only")

    with write_round_trips(store_database, tmp_path) as round_trips:
        await write(store_database, work)
    assert round_trips == [1]
    assert await stored_threads(store_database) == ["only"]


async def test_a_resumed_step_writes_in_nine_round_trips(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    # A paid model, so that the tool outputs take a hold and the step charges it.
    hosted = hosted_openai
    fake_openai.script([WEATHER_CALL, WEATHER_CALL])
    run = await hosted.new_run(model_id=OPENAI_MODEL)
    worker = hosted.worker()
    await worker.fill_slots()
    await worker.drain()
    paused = await hosted.get_run(run["id"])
    assert paused["status"] == "requires_action"
    with write_round_trips(hosted.context.engine, tmp_path) as accepted:
        assert (await hosted.answer(paused)).status_code == 200
    with write_round_trips(hosted.context.engine, tmp_path) as stepped:
        assert await worker.fill_slots() == 1
        await worker.drain()
    again = await hosted.get_run(run["id"])
    assert (again["status"], again["step_count"]) == ("requires_action", 2)
    # The outputs and the hold [BEGIN, hold, run] [events, account] [COMMIT]; the claim
    # [BEGIN, claim] [events, COMMIT]; the step [BEGIN, charge] [hold] [run] [the rest, COMMIT].
    assert accepted == [3]
    assert stepped[:2] == [2, 4]
    assert sum(accepted + stepped[:2]) == 9
