"""Runs that started other runs (an agent calling an agent as a tool): creating the children,
rolling their costs up, copying their events into their ancestors' logs, and ending them with
their parent. Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, insert, select, update

from juru.core.states import ACTIVE, RunStatus, check_transition
from juru.store.database import Database
from juru.store.holds import release_in
from juru.store.lists import among
from juru.store.records import RunRecord
from juru.store.run_log import NewRunEvent, append_to_logs, status_event
from juru.store.tables import runs, threads
from juru.store.transactions import write

# More than any depth an agent may call to: a bound on the walk up a broken chain.
MAX_WALK = 32
_ACTIVE = [status.value for status in ACTIVE]


async def children_of(engine: Database, run_id: str) -> list[RunRecord]:
    """The runs that `run_id` started, oldest first."""
    query = select(runs).where(runs.c.parent_run_id == run_id).order_by(runs.c.id)
    return [RunRecord.from_row(row) for row in await engine.rows(query)]


async def ancestors_of(engine: Database, run: RunRecord) -> list[str]:
    """The run's parent, its parent's parent, ... (nearest first)."""

    def walk(connection: Connection) -> list[str]:
        return _ancestors(connection, run.parent_run_id)

    return [] if run.parent_run_id is None else await engine.read(walk)


def _ancestors(connection: Connection, parent_run_id: str | None) -> list[str]:
    found: list[str] = []
    while parent_run_id is not None and len(found) < MAX_WALK:
        found.append(parent_run_id)
        parent_run_id = connection.scalar(
            select(runs.c.parent_run_id).where(runs.c.id == parent_run_id)
        )
    return found


def add_run_cost(connection: Connection, run_id: str, cost: Decimal) -> None:
    """Add a charge to the run's running cost and to each of its ancestors' (a parent's cost
    is its own charges and its children's)."""
    parent = connection.execute(
        update(runs)
        .where(runs.c.id == run_id)
        .values(cost_rupiah=runs.c.cost_rupiah + cost)
        .returning(runs.c.parent_run_id)
    ).scalar()
    roll_up(connection, _ancestors(connection, parent), cost, None, [])


def roll_up(
    connection: Connection,
    ancestors: Sequence[str],
    cost: Decimal,
    now: datetime | None,
    events: Sequence[NewRunEvent],
    child_run_id: str = "",
) -> None:
    """A descendant's step seen from each of its `ancestors` (nearest first): its cost added
    to theirs, and its `events` copied into their logs with the depth and the run they
    came from (keys made the child's own, so a redone step copies nothing twice)."""
    if not ancestors:
        return
    values: dict[str, Any] = {}
    if cost:
        values["cost_rupiah"] = runs.c.cost_rupiah + cost
    if now is not None:
        values["updated_at"] = now
    if values:
        # Each ancestor's row is written before its log, like every writer of a run's log.
        connection.execute(update(runs).where(runs.c.id.in_(list(ancestors))).values(values))
    if now is None or not events:
        return
    copies = [
        (
            ancestor,
            NewRunEvent(
                event.type,
                {**event.data, "run_id": child_run_id, "depth": depth},
                None if event.key is None else f"{child_run_id}:{event.key}",
            ),
        )
        for depth, ancestor in enumerate(ancestors, start=1)
        for event in events
    ]
    append_to_logs(connection, copies, now)


def insert_children(
    connection: Connection, parent_run_id: str, children: Sequence[dict[str, Any]], now: datetime
) -> list[str]:
    """Create the child runs not yet created (each on a thread of its own), keyed by the tool
    call that asked for them (`idempotency_key`); returns the ids of those made now."""
    made = set(
        connection.execute(
            select(runs.c.idempotency_key).where(runs.c.parent_run_id == parent_run_id)
        ).scalars()
    )
    created: list[str] = []
    for child in children:
        run_values = child["run"]
        if run_values["idempotency_key"] in made:
            continue
        connection.execute(insert(threads).values(child["thread"]))
        row = connection.execute(
            insert(runs).values({**run_values, "parent_run_id": parent_run_id}).returning(*runs.c)
        ).one()
        append_to_logs(connection, [(row.id, status_event(row._mapping))], now)
        created.append(row.id)
    return created


def lock_descendants(connection: Connection, run_id: str) -> None:
    """Lock the run's active descendants, deepest first, before the run itself is written: a
    descendant's step write locks its own row, then its ancestors', so taking them in the same
    order keeps the two from deadlocking on PostgreSQL (SQLite has one writer)."""
    if connection.dialect.name != "postgresql":
        return
    levels: list[list[str]] = []
    parents = [run_id]
    while parents and len(levels) < MAX_WALK:
        parents = list(
            connection.execute(
                select(runs.c.id).where(
                    runs.c.parent_run_id.in_(parents), among(runs.c.status, _ACTIVE)
                )
            ).scalars()
        )
        levels.append(parents)
    for level in reversed(levels):
        if level:
            connection.execute(
                select(runs.c.id).where(runs.c.id.in_(level)).order_by(runs.c.id).with_for_update()
            ).all()


def end_descendants(connection: Connection, run_id: str, now: datetime) -> list[str]:
    """Cancel the active runs below `run_id` (its children, theirs, ...), which just ended;
    their unclaimed holds are given back. Returns their ids."""
    for source in ACTIVE:
        check_transition(source, RunStatus.CANCELLED)
    values = {
        "finished_at": now,
        "updated_at": now,
        "lease_owner": None,
        "lease_expires_at": None,
        "deadline_at": None,
        "pending_tool_calls": None,
        "tool_outputs": None,
        "error": f"cancelled: the run {run_id} that started it ended",
    }
    ended: list[str] = []
    parents = [run_id]
    while parents and len(ended) < 1000:
        below = runs.c.parent_run_id.in_(parents) & among(runs.c.status, _ACTIVE)
        holds = connection.execute(
            select(runs.c.account_id, runs.c.hold_id).where(
                below, runs.c.lease_owner.is_(None), runs.c.hold_id.is_not(None)
            )
        ).all()
        rows = connection.execute(
            update(runs)
            .where(below)
            .values(
                {
                    **values,
                    "status": RunStatus.CANCELLED.value,
                    "hold_id": None,
                    "hold_rupiah": None,
                }
            )
            .returning(*runs.c)
        ).all()
        for hold in holds:
            release_in(connection, hold.account_id, hold.hold_id)
        append_to_logs(connection, [(row.id, status_event(row._mapping)) for row in rows], now)
        parents = [row.id for row in rows]
        ended += parents
    return ended


def _active_seconds(row: Any, now: datetime) -> float:
    seconds = float(row.active_seconds)
    if row.active_since is None:
        return seconds
    return seconds + float((now - row.active_since).total_seconds())


def pause_ancestors(
    connection: Connection,
    ancestors: Sequence[str],
    child_run_id: str,
    pending: Sequence[dict[str, str]],
    now: datetime,
) -> list[str]:
    """A descendant paused for client tool calls: each of its `ancestors` waiting for it goes
    to `requires_action` with those calls (marked with the run they belong to), added to the
    calls it already shows. Returns the ancestors moved or changed."""
    check_transition(RunStatus.RUNNING, RunStatus.REQUIRES_ACTION)
    marked = [{**call, "run_id": call.get("run_id") or child_run_id} for call in pending]
    changed: list[str] = []
    for ancestor in ancestors:
        row = connection.execute(
            select(runs).where(
                runs.c.id == ancestor,
                among(runs.c.status, [RunStatus.RUNNING.value, RunStatus.REQUIRES_ACTION.value]),
            )
        ).first()
        if row is None:
            break
        shown = list(row.pending_tool_calls or [])
        known = {call["id"] for call in shown}
        values: dict[str, Any] = {
            "status": RunStatus.REQUIRES_ACTION.value,
            "pending_tool_calls": shown + [call for call in marked if call["id"] not in known],
            "pause_count": row.pause_count + 1,
            "updated_at": now,
        }
        if row.status == RunStatus.RUNNING.value:
            values.update(
                tool_outputs=None,
                lease_owner=None,
                lease_expires_at=None,
                active_seconds=_active_seconds(row, now),
                active_since=None,
                deadline_at=None,
                waiting_since=now,
            )
        moved = connection.execute(
            update(runs)
            .where(runs.c.id == ancestor, runs.c.status == row.status)
            .values(values)
            .returning(*runs.c)
        ).first()
        if moved is None:
            break
        append_to_logs(connection, [(ancestor, status_event(moved._mapping))], now)
        changed.append(ancestor)
    return changed


class _NotWaiting(Exception):
    """Rolls the resumption back: a run of the tree no longer waits for these outputs."""


async def resume_through_children(
    engine: Database,
    top: RunRecord,
    outputs: dict[str, str],
    now: datetime,
    wall_clock_seconds: float,
) -> list[str] | None:
    """Tool outputs submitted on `top` for calls of runs below it: each run that made calls
    goes back to `running` with its own outputs, and every run between it and `top` (and `top`)
    back to `running` waiting for its children, in one transaction. Returns the ids moved, or
    None (nothing written) when `top` no longer waits for these calls."""
    check_transition(RunStatus.REQUIRES_ACTION, RunStatus.RUNNING)
    by_owner: dict[str, dict[str, str]] = {}
    for call in top.pending_tool_calls or []:
        by_owner.setdefault(call.get("run_id") or top.id, {})[call["id"]] = outputs[call["id"]]

    def resume(connection: Connection) -> list[str]:
        moving: dict[str, dict[str, str] | None] = {top.id: by_owner.get(top.id)}
        answers: dict[str, str] | None
        for owner, answers in by_owner.items():
            moving[owner] = answers
            for ancestor in _ancestors(connection, _parent_of(connection, owner)):
                if ancestor == top.id:
                    break
                moving.setdefault(ancestor, None)
        for run_id, answers in moving.items():
            row = connection.execute(select(runs).where(runs.c.id == run_id)).first()
            if row is None or row.status != RunStatus.REQUIRES_ACTION.value:
                raise _NotWaiting
            if run_id == top.id and row.pause_count != top.pause_count:
                raise _NotWaiting
            remaining = wall_clock_seconds - float(row.active_seconds)
            moved = connection.execute(
                update(runs)
                .where(runs.c.id == run_id, runs.c.status == RunStatus.REQUIRES_ACTION.value)
                .values(
                    status=RunStatus.RUNNING.value,
                    tool_outputs=answers,
                    pending_tool_calls=None,
                    active_since=now,
                    deadline_at=now + timedelta(seconds=remaining),
                    waiting_since=None,
                    lease_owner=None,
                    lease_expires_at=None,
                    updated_at=now,
                )
                .returning(*runs.c)
            ).one()
            append_to_logs(connection, [(run_id, status_event(moved._mapping))], now)
        return list(moving)

    try:
        return await write(engine, resume)
    except _NotWaiting:
        return None


def _parent_of(connection: Connection, run_id: str) -> str | None:
    parent: str | None = connection.scalar(select(runs.c.parent_run_id).where(runs.c.id == run_id))
    return parent


def withdraw_calls(
    connection: Connection, run_id: str, ended: Collection[str], now: datetime, wall_clock: float
) -> list[str]:
    """Runs `ended` (`run_id` and those below it) ended while an ancestor showed their client
    tool calls: the calls are taken off each ancestor, and an ancestor left with none goes
    back to `running`, to take up its children's results. Returns the ancestors changed."""
    changed: list[str] = []
    for ancestor in _ancestors(connection, _parent_of(connection, run_id)):
        row = connection.execute(
            select(runs).where(
                runs.c.id == ancestor, runs.c.status == RunStatus.REQUIRES_ACTION.value
            )
        ).first()
        if row is None:
            break
        shown = list(row.pending_tool_calls or [])
        kept = [call for call in shown if call.get("run_id") not in ended]
        if len(kept) == len(shown):
            break
        values: dict[str, Any] = {"pending_tool_calls": kept, "pause_count": row.pause_count + 1}
        if not kept:
            check_transition(RunStatus.REQUIRES_ACTION, RunStatus.RUNNING)
            remaining = wall_clock - float(row.active_seconds)
            values.update(
                status=RunStatus.RUNNING.value,
                pending_tool_calls=None,
                active_since=now,
                deadline_at=now + timedelta(seconds=remaining),
                waiting_since=None,
            )
        moved = connection.execute(
            update(runs)
            .where(runs.c.id == ancestor, runs.c.status == RunStatus.REQUIRES_ACTION.value)
            .values({**values, "updated_at": now})
            .returning(*runs.c)
        ).one()
        append_to_logs(connection, [(ancestor, status_event(moved._mapping))], now)
        changed.append(ancestor)
    return changed
