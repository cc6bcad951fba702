"""A write's parts on SQLite (`store.joined`): the triggers live on the writer's connection
only, the pruning of checkpoints gets its trigger once LangGraph's saver has its tables, and a
step's parts find their rows by unique keys."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from sqlalchemy import Connection, create_engine, text

from juru.core.run_events import RunEventType
from juru.store.accounts import account_by_id, create_account
from juru.store.checkpointer import set_up_saver
from juru.store.database import Database, open_database
from juru.store.holds import debit_part
from juru.store.joined import Part, write_parts
from juru.store.pruning import keep_latest_part
from juru.store.run_log import NewRunEvent, events_part
from juru.store.transactions import write
from juru.store.transcript import transcript_part
from juru.store.urls import DatabaseUrl

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> DatabaseUrl:
    """A migrated SQLite file without LangGraph's saver tables."""
    shutil.copyfile(sqlite_template, tmp_path / "juru.db")
    return DatabaseUrl.parse(f"sqlite:///{tmp_path}/juru.db")


@pytest.fixture
async def database(sqlite_url: DatabaseUrl) -> AsyncIterator[Database]:
    database = open_database(sqlite_url)
    yield database
    await database.dispose()


def checkpoints_of(database: DatabaseUrl, thread: str) -> list[str]:
    engine = create_engine(database.sync_url())
    try:
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT checkpoint_id FROM checkpoints WHERE thread_id = :t ORDER BY 1"),
                {"t": thread},
            )
            return [str(row[0]) for row in rows]
    finally:
        engine.dispose()


async def test_pruning_waits_for_the_savers_tables_and_then_prunes(
    sqlite_url: DatabaseUrl, database: Database
) -> None:
    # No saver tables yet: the pruning part has nothing to write, and is left out; the write's
    # other parts (a debit here) are written all the same.
    account = await create_account(database, "one", "standard", Decimal(10), NOW)
    parts = [keep_latest_part("thread-1"), debit_part(account.id, Decimal(1))]
    await write(database, lambda connection: write_parts(connection, parts))
    debited = await account_by_id(database, account.id)
    assert debited is not None and debited.balance_rupiah == Decimal(9)
    # The tables made by another connection (as `juru serve` does when it starts), and
    # checkpoints written to them: the writer's next write makes the trigger and prunes.
    await set_up_saver(sqlite_url)

    def three_checkpoints(connection: Connection) -> None:
        for thread, checkpoint in [("thread-1", "1"), ("thread-1", "2"), ("thread-2", "1")]:
            connection.execute(
                text(
                    "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, "
                    "checkpoint, metadata) VALUES (:t, '', :c, x'00', x'00')"
                ),
                {"t": thread, "c": checkpoint},
            )

    await write(database, three_checkpoints)
    await write(
        database, lambda connection: write_parts(connection, [keep_latest_part("thread-1")])
    )
    assert checkpoints_of(sqlite_url, "thread-1") == ["2"]
    assert checkpoints_of(sqlite_url, "thread-2") == ["1"]


def test_parts_are_written_by_the_writers_connection_only(sqlite_url: DatabaseUrl) -> None:
    # Another connection has no trigger: an INSERT into the view would write nothing, so the
    # parts are refused before it.
    engine = create_engine(sqlite_url.sync_url())
    event = NewRunEvent(RunEventType.MESSAGE_COMPLETED, {"n": 1})
    try:
        with engine.begin() as connection, pytest.raises(RuntimeError, match="writer"):
            write_parts(connection, [events_part([("run_1", event)], NOW)])
    finally:
        engine.dispose()


def seed_account_thread_and_run(connection: Connection) -> None:
    day = "'2026-01-01 00:00:00'"
    for statement in (
        "INSERT INTO accounts (id, name, tier, balance_rupiah, held_rupiah, created_at) "
        f"VALUES ('acc', 'acc', 'standard', 0, 0, {day})",
        "INSERT INTO agents (id, account_id, name, model_id, system_prompt, tools, builtin_tools, "
        "max_steps, mcp_servers, agent_tools, revision, created_at, updated_at) VALUES ('agt', "
        f"'acc', 'a', 'm', 's', '[]', '[]', 10, '[]', '[]', 1, {day}, {day})",
        "INSERT INTO threads (id, account_id, agent_id, created_at) "
        f"VALUES ('thr', 'acc', 'agt', {day})",
        "INSERT INTO runs (id, account_id, thread_id, agent_id, status, step_count, max_steps, "
        "cost_rupiah, input, pause_count, attempts, active_seconds, created_at, updated_at) "
        f"VALUES ('run', 'acc', 'thr', 'agt', 'running', 0, 10, 0, '[]', 0, 0, 0, {day}, {day})",
    ):
        connection.execute(text(statement))


async def test_a_steps_parts_cost_sqlite_the_same_in_a_long_thread(database: Database) -> None:
    # A step's transcript rows and events are found by their thread's (run's) unique keys, not
    # by reading the thread's messages (the run's events): the work SQLite's machine does for
    # one step's parts, counted in its instructions, does not grow with the conversation.
    await write(database, seed_account_thread_and_run)

    def step_parts(first: int, count: int) -> list[Part | None]:
        messages = [
            {"message_id": f"m{n}", "role": "assistant", "content": f"reply {n}"}
            for n in range(first, first + count)
        ]
        events = [
            ("run", NewRunEvent(RunEventType.MESSAGE_COMPLETED, {"n": n}, key=f"m{n}"))
            for n in range(first, first + count)
        ]
        return [transcript_part("thr", "run", messages, NOW), events_part(events, NOW)]

    async def instructions_of(parts: list[Part | None]) -> int:
        counted = [0]

        def counting(connection: Connection) -> None:
            driver = connection.connection.driver_connection
            assert driver is not None

            def count() -> int:
                counted[0] += 1
                return 0

            driver.set_progress_handler(count, 1)
            try:
                write_parts(connection, parts)
            finally:
                driver.set_progress_handler(None, 1)

        await write(database, counting)
        return counted[0]

    short = await instructions_of(step_parts(0, 2))
    await write(database, lambda c: write_parts(c, step_parts(2, 3000)))
    long = await instructions_of(step_parts(3002, 2))
    assert long < short * 1.5, (short, long)
