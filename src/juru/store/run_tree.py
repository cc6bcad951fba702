"""Runs that started other runs (an agent calling an agent as a tool): creating the children,
rolling their costs up, copying their events into their ancestors' logs, and ending them with
their parent. Each function runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, insert, select, update

from juru.core.states import ACTIVE, RunStatus, check_transition
from juru.store.database import Database
from juru.store.holds import release_in
from juru.store.records import RunRecord
from juru.store.run_log import NewRunEvent, append_to_logs, status_event
from juru.store.tables import runs, threads

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
        below = runs.c.parent_run_id.in_(parents) & runs.c.status.in_(_ACTIVE)
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
