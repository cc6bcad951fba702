"""Each run's durable event log: what `GET /v1/runs/:id/events` replays and follows.

Events are appended inside the transaction of the change they describe (a status change, a
step's write), so the log never says more or less than the database holds. Their ids come from
the statement itself (the run's last id plus the event's place among those appended; on
PostgreSQL in the statement that also sends the write's notices), and every writer of a run's
events has updated the run's row first in the same transaction, which serialises them: ids are
1, 2, 3, ... with no gaps and no duplicates, on both databases.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, RowMapping, bindparam, delete, exists, func, select

from juru.core.run_events import RunEventType
from juru.store.database import Database
from juru.store.joined import JoinedSql, Part, write_parts
from juru.store.lists import JsonRows, in_list
from juru.store.tables import run_events, runs
from juru.store.transactions import Notice, notify, write
from juru.store.types import UtcDateTime

# A `run.status` event keeps the run as its view shows it: these of the run's columns.
RUN_VIEW_COLUMNS = (
    "id",
    "thread_id",
    "agent_id",
    "parent_run_id",
    "status",
    "step_count",
    "max_steps",
    "cost_rupiah",
    "pending_tool_calls",
    "error",
    "output",
    "created_at",
    "updated_at",
)
# A `message.completed` event keeps the transcript row of its message.
MESSAGE_FIELDS = ("message_id", "role", "content", "tool_calls", "tool_call_id", "name")
PAGE = 500


@dataclass(frozen=True)
class NewRunEvent:
    """An event to append; `key` marks one that a redone step would write again."""

    type: RunEventType
    data: dict[str, Any]
    key: str | None = None


@dataclass(frozen=True)
class RunEventRecord:
    run_id: str
    seq: int
    type: str
    data: dict[str, Any]
    created_at: datetime


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def status_event(run_row: RowMapping | Mapping[str, Any]) -> NewRunEvent:
    """The run's new status, from the row its status change returned."""
    view = {name: _jsonable(run_row[name]) for name in RUN_VIEW_COLUMNS}
    return NewRunEvent(RunEventType.STATUS, view)


def message_events(
    thread_id: str, run_id: str | None, messages: Sequence[Mapping[str, Any]], now: datetime
) -> list[NewRunEvent]:
    """A `message.completed` per transcript entry, keyed by the message's id."""
    return [
        NewRunEvent(
            RunEventType.MESSAGE_COMPLETED,
            {
                **{name: message.get(name) for name in MESSAGE_FIELDS},
                "thread_id": thread_id,
                "run_id": run_id,
                "created_at": now.isoformat(),
            },
            key=f"message:{message['message_id']}",
        )
        for message in messages
    ]


def step_key(step_count: int) -> str:
    """The key of the `step.completed` event of model step `step_count`."""
    return f"step:{step_count}"


def step_event(step_count: int, cost_rupiah: Decimal) -> NewRunEvent:
    return NewRunEvent(
        RunEventType.STEP_COMPLETED,
        {"step_count": step_count, "cost_rupiah": str(cost_rupiah)},
        key=step_key(step_count),
    )


# A fresh event's id: its run's last id, plus its place among the run's events appended.
_NEXT_SEQ = """(SELECT coalesce(max(run_events.seq), 0) FROM run_events
             WHERE run_events.run_id = fresh.run_id)
            + row_number() OVER (PARTITION BY fresh.run_id ORDER BY fresh.position)"""


# PostgreSQL: the events, given as rows of one JSON value (`JsonRows`), appended and the
# notices sent, as a part of a joined statement (`store.joined`). The events whose key the
# run's log holds already (a redone step's) are left out before the rest are numbered, each
# run's after its last id and in the order given: what one row at a time with `ON CONFLICT DO
# NOTHING` would write. The notices are sent by an entry that the statement's row counts (an
# entry nothing reads would not run).
EVENTS_AND_NOTICES = JoinedSql(
    frozenset({"run_events"}),
    (
        """events_given AS (
            SELECT given.item ->> 0 AS run_id, given.item ->> 1 AS type,
                given.item ->> 2 AS key, given.item -> 3 AS data, given.position
            FROM json_array_elements(CAST(:events_rows AS json))
                WITH ORDINALITY AS given(item, position)
        )""",
        # A keyed event is looked up by its run and key, one index probe each: the planner,
        # taking the given rows for 100, would otherwise hash every event of every run.
        """events_fresh AS (
            SELECT given.* FROM events_given AS given
            LEFT JOIN LATERAL (
                SELECT true AS found FROM run_events
                WHERE run_events.run_id = given.run_id AND run_events.key = given.key
                LIMIT 1
            ) AS known ON true
            WHERE known.found IS NULL
        )""",
        f"""events_appended AS (
            INSERT INTO run_events (run_id, seq, type, key, data, created_at)
            SELECT
                fresh.run_id,
                {_NEXT_SEQ},
                fresh.type, fresh.key, fresh.data, :events_created_at
            FROM events_fresh AS fresh
        )""",
        """events_notices AS (
            SELECT pg_notify(notice.item ->> 0, notice.item ->> 1)
            FROM json_array_elements(CAST(:events_notices AS json)) AS notice(item)
        )""",
    ),
    runs=("(SELECT count(*) FROM events_notices) AS notices_sent",),
    types=(
        bindparam("events_created_at", type_=UtcDateTime()),
        bindparam("events_rows", type_=JsonRows()),
        bindparam("events_notices", type_=JsonRows()),
    ),
    # SQLite: the same rows appended (the notices are kept for the COMMIT: `events_part`). The
    # SELECT is evaluated whole before the first row goes in, as it reads the table written.
    kind="events",
    sqlite=(
        f"""INSERT INTO run_events (run_id, seq, type, "key", data, created_at)
        SELECT
            fresh.run_id,
            {_NEXT_SEQ},
            fresh.type, fresh.event_key, fresh.data, :events_created_at
        FROM (
            SELECT json_extract(given.value, '$[0]') AS run_id,
                json_extract(given.value, '$[1]') AS type,
                json_extract(given.value, '$[2]') AS event_key,
                json_quote(json_extract(given.value, '$[3]')) AS data,
                given.key AS position
            FROM json_each(NEW.body, '$.events_rows') AS given
        ) AS fresh
        WHERE fresh.event_key IS NULL OR NOT EXISTS (
            SELECT 1 FROM run_events
            WHERE run_events.run_id = fresh.run_id AND run_events."key" = fresh.event_key
        )""",
    ),
)


def append_events(
    connection: Connection,
    run_id: str,
    events: Sequence[NewRunEvent],
    now: datetime,
    notices: Sequence[Notice] = (),
) -> None:
    """Append `events` to the run's log in order, and send `notices` (PostgreSQL) from the same
    transaction. The caller has updated the run's row in this transaction."""
    append_to_logs(connection, [(run_id, event) for event in events], now, notices)


def append_to_logs(
    connection: Connection,
    events: Sequence[tuple[str, NewRunEvent]],
    now: datetime,
    notices: Sequence[Notice] = (),
) -> None:
    """Append each `(run_id, event)` to its run's log, in order, and send `notices` from the
    same transaction. One statement (on PostgreSQL the events and the notices together; on
    SQLite the notices are kept for the COMMIT, `store.write_queue`). The caller has updated
    each run's row in this transaction."""
    write_parts(connection, [events_part(events, now, notices)])


def events_part(
    events: Sequence[tuple[str, NewRunEvent]], now: datetime, notices: Sequence[Notice] = ()
) -> Part | None:
    """`append_to_logs` as a part of a joined write (`store.joined`); None when there is
    nothing to append or send."""
    if not events and not notices:
        return None

    parameters = {
        "events_rows": [
            (run_id, event.type.value, event.key, event.data) for run_id, event in events
        ],
        "events_created_at": now,
        "events_notices": list(notices),
    }
    keep = None if not notices else lambda connection: notify(connection, notices)
    return Part(EVENTS_AND_NOTICES, parameters, keep, in_sqlite=bool(events))


def log_tail_columns(keyed: bool = True) -> tuple[Any, ...]:
    """Columns for the RETURNING of an UPDATE of `runs`: `log_last_seq`, the last id in the
    run's log, and (when the events to append are `keyed`) `log_has_keys`, whether an event
    with one of the keys of the list parameter `log_keys` is in it. The update locked the
    run's row, which every writer of its log does first: the events this transaction appends
    next get the ids after `log_last_seq`, in order, unless one of them is there already (a
    redone step's), which writes nothing."""
    last = (
        select(func.coalesce(func.max(run_events.c.seq), 0))
        .where(run_events.c.run_id == runs.c.id)
        .correlate(runs)
        .scalar_subquery()
        .label("log_last_seq")
    )
    if not keyed:
        return (last,)
    known = (
        exists()
        .where(
            run_events.c.run_id == runs.c.id,
            in_list(run_events.c.key, "log_keys"),
        )
        .correlate(runs)
        .label("log_has_keys")
    )
    return last, known


def appended_records(
    run_id: str, events: Sequence[NewRunEvent], row: RowMapping, now: datetime
) -> list[RunEventRecord] | None:
    """The records `append_events(run_id, events)` writes, from `row`, the run's update with
    `log_tail_columns` (and `log_keys` the events' keys, where they have any); None when a key
    was there already (some of the events will not be written, and the ids of the others are
    not known here)."""
    if row.get("log_has_keys"):
        return None
    first = int(row["log_last_seq"]) + 1
    return [
        RunEventRecord(run_id, first + index, event.type.value, event.data, now)
        for index, event in enumerate(events)
    ]


def event_keys(events: Sequence[NewRunEvent]) -> list[str]:
    return [event.key for event in events if event.key is not None]


_EVENTS_AFTER = (
    select(run_events)
    .where(run_events.c.run_id == bindparam("run_id"), run_events.c.seq > bindparam("after"))
    .order_by(run_events.c.seq)
    .limit(bindparam("limit"))
)


async def events_after(
    engine: Database, run_id: str, after: int, limit: int = PAGE
) -> list[RunEventRecord]:
    """Up to `limit` of the run's events after id `after`, in order."""
    rows = await engine.rows(_EVENTS_AFTER, {"run_id": run_id, "after": after, "limit": limit})
    return [
        RunEventRecord(row["run_id"], row["seq"], row["type"], row["data"], row["created_at"])
        for row in rows
    ]


async def prune_events(engine: Database, finished_before: datetime, batch: int = 200) -> int:
    """Delete the logs of runs that finished before the cutoff, `batch` runs per transaction
    (so no single write holds the database long); the number of events deleted."""
    old_runs = (
        select(run_events.c.run_id)
        .join(runs, runs.c.id == run_events.c.run_id)
        .where(runs.c.finished_at < finished_before)
        .distinct()
        .limit(batch)
    )
    statement = delete(run_events).where(run_events.c.run_id.in_(old_runs.scalar_subquery()))

    def prune(connection: Connection) -> int:
        return connection.execute(statement).rowcount

    deleted = 0
    while count := await write(engine, prune):
        deleted += count
    return deleted
