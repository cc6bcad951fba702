"""Queries on `thread_messages`: each thread's transcript, with the run behind every message."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, select

from juru.store.database import Database
from juru.store.joined import JoinedSql, Part, write_parts
from juru.store.lists import JsonRows
from juru.store.pages import Page
from juru.store.records import TranscriptMessage
from juru.store.run_log import append_events, message_events
from juru.store.tables import runs, thread_messages
from juru.store.transactions import write
from juru.store.types import UtcDateTime

TRANSCRIPT_FIELDS = ("message_id", "role", "content", "tool_calls", "tool_call_id", "name")


def append_transcript(
    connection: Connection,
    thread_id: str,
    run_id: str | None,
    messages: Sequence[dict[str, Any]],
    now: datetime,
) -> None:
    """Append `messages` in order, in one statement; an id the thread holds already is
    updated in place."""
    write_parts(connection, [transcript_part(thread_id, run_id, messages, now)])


# PostgreSQL: the messages, given as rows of one JSON value (`JsonRows`), as a part of a
# joined statement (`store.joined`): an id the thread holds already (a redone step's) updates
# its row in place, the others are appended after the thread's last position, in the order
# given.
TRANSCRIPT = JoinedSql(
    frozenset({"thread_messages"}),
    (
        # The items of a row are in the order of `TRANSCRIPT_FIELDS`.
        """transcript_given AS (
            SELECT given.item ->> 0 AS message_id, given.item ->> 1 AS role,
                given.item ->> 2 AS content, given.item -> 3 AS tool_calls,
                given.item ->> 4 AS tool_call_id, given.item ->> 5 AS name, given.position
            FROM json_array_elements(CAST(:transcript_rows AS json))
                WITH ORDINALITY AS given(item, position)
        )""",
        """transcript_known AS (
            SELECT thread_messages.message_id FROM thread_messages
            WHERE thread_messages.thread_id = CAST(:transcript_thread AS text)
                AND thread_messages.message_id IN (SELECT message_id FROM transcript_given)
        )""",
        """transcript_appended AS (
            INSERT INTO thread_messages (thread_id, position, message_id, run_id, role, content,
                                         tool_calls, tool_call_id, name, created_at)
            SELECT
                CAST(:transcript_thread AS text),
                (SELECT coalesce(max(thread_messages.position), -1) FROM thread_messages
                 WHERE thread_messages.thread_id = CAST(:transcript_thread AS text))
                + row_number() OVER (ORDER BY given.position),
                given.message_id, CAST(:transcript_run AS text), given.role, given.content,
                given.tool_calls, given.tool_call_id, given.name,
                :transcript_created_at
            FROM transcript_given AS given
            WHERE given.message_id NOT IN (SELECT message_id FROM transcript_known)
            ON CONFLICT (thread_id, message_id) DO UPDATE
                SET content = excluded.content, tool_calls = excluded.tool_calls
        )""",
        """transcript_rewritten AS (
            UPDATE thread_messages
            SET content = given.content, tool_calls = given.tool_calls
            FROM transcript_given AS given
            WHERE thread_messages.thread_id = CAST(:transcript_thread AS text)
                AND thread_messages.message_id = given.message_id
        )""",
    ),
    types=(
        bindparam("transcript_created_at", type_=UtcDateTime()),
        bindparam("transcript_rows", type_=JsonRows()),
    ),
    # SQLite: the known ids rewritten, then the others appended (the SELECT is evaluated whole
    # before the first row goes in, as it reads the table written).
    kind="transcript",
    sqlite=(
        # The ids given, looked up by the thread's index of them (a join with the given rows
        # would read the whole thread).
        """UPDATE thread_messages
        SET (content, tool_calls) = (
            SELECT json_extract(given.value, '$[2]'),
                json_quote(json_extract(given.value, '$[3]'))
            FROM json_each(NEW.body, '$.transcript_rows') AS given
            WHERE json_extract(given.value, '$[0]') = thread_messages.message_id
        )
        WHERE thread_messages.thread_id = :transcript_thread
            AND thread_messages.message_id IN (
                SELECT json_extract(given.value, '$[0]')
                FROM json_each(NEW.body, '$.transcript_rows') AS given
            )""",
        """INSERT INTO thread_messages (thread_id, position, message_id, run_id, role, content,
                                     tool_calls, tool_call_id, name, created_at)
        SELECT
            :transcript_thread,
            (SELECT coalesce(max(thread_messages.position), -1) FROM thread_messages
             WHERE thread_messages.thread_id = :transcript_thread)
            + row_number() OVER (ORDER BY given.key),
            json_extract(given.value, '$[0]'), :transcript_run, json_extract(given.value, '$[1]'),
            json_extract(given.value, '$[2]'), json_quote(json_extract(given.value, '$[3]')),
            json_extract(given.value, '$[4]'), json_extract(given.value, '$[5]'),
            :transcript_created_at
        FROM json_each(NEW.body, '$.transcript_rows') AS given
        WHERE NOT EXISTS (
            SELECT 1 FROM thread_messages
            WHERE thread_messages.thread_id = :transcript_thread
                AND thread_messages.message_id = json_extract(given.value, '$[0]')
        )""",
    ),
)


def transcript_part(
    thread_id: str, run_id: str | None, messages: Sequence[dict[str, Any]], now: datetime
) -> Part | None:
    """`append_transcript` as a part of a joined write (`store.joined`); None when there is
    no message."""
    if not messages:
        return None
    # One row per id, where it first appears, with its last content (as one row at a time
    # would leave it).
    unique: dict[str, dict[str, Any]] = {}
    for message in messages:
        unique[message["message_id"]] = {**unique.get(message["message_id"], {}), **message}
    rows = list(unique.values())

    parameters = {
        "transcript_thread": thread_id,
        "transcript_run": run_id,
        "transcript_created_at": now,
        "transcript_rows": [tuple(row.get(name) for name in TRANSCRIPT_FIELDS) for row in rows],
    }
    return Part(TRANSCRIPT, parameters)


async def append_run_messages(
    engine: Database,
    thread_id: str,
    run_id: str,
    messages: Sequence[dict[str, Any]],
    now: datetime,
) -> None:
    """Append a run's messages in order, with their events, in a transaction of their own."""
    if not messages:
        return

    def append(connection: Connection) -> None:
        # Writers of a run's events hold its row first (their ids are counted in order).
        connection.execute(select(runs.c.id).where(runs.c.id == run_id).with_for_update())
        append_transcript(connection, thread_id, run_id, messages, now)
        append_events(connection, run_id, message_events(thread_id, run_id, messages, now), now)

    await write(engine, append)


async def list_messages(
    engine: Database, thread_id: str, limit: int, after: int | None
) -> Page[TranscriptMessage]:
    """Messages in the order they were said, after position `after`."""
    query = select(thread_messages).where(thread_messages.c.thread_id == thread_id)
    if after is not None:
        query = query.where(thread_messages.c.position > after)
    query = query.order_by(thread_messages.c.position).limit(limit + 1)
    rows = await engine.rows(query)
    items = [TranscriptMessage.from_row(row) for row in rows[:limit]]
    return Page(items, has_more=len(rows) > limit)


async def position_of(engine: Database, thread_id: str, message_id: str) -> int | None:
    position = await engine.scalar(
        select(thread_messages.c.position).where(
            thread_messages.c.thread_id == thread_id,
            thread_messages.c.message_id == message_id,
        )
    )
    return None if position is None else int(position)
