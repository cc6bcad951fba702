"""A run's step, written whole: transcript rows, step count, charge, balance and status change
(and, when the run pauses or ends, the checkpoint LangGraph saved for it and the pruning of the
older ones) commit in one transaction, or none of them does.

Every part is safe to write twice (a step redone after a crash): transcript rows are keyed by
message id (a second write of an id updates its row in place), a charge by its `charge_key`
(a second one is not taken), and the run's events of a message or a step by their key.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, func, select

from juru.core.money import PriceRules
from juru.core.states import RunStatus, check_transition
from juru.store.checkpointer import CheckpointSaves, write_saves
from juru.store.database import Database
from juru.store.joined import write_parts
from juru.store.pruning import keep_latest_part
from juru.store.run_log import (
    RunEventRecord,
    appended_records,
    event_keys,
    events_part,
    log_tail_columns,
    message_events,
    status_event,
    step_event,
    step_key,
)
from juru.store.run_state import RUN_STATE_COLUMNS
from juru.store.run_tree import insert_children, pause_ancestors, roll_up
from juru.store.runs import RunGuard, run_update, run_update_parameters
from juru.store.tables import runs
from juru.store.transactions import Notice, sent_together, write
from juru.store.transcript import transcript_part
from juru.store.usage import (
    CHARGE_WRITTEN,
    ChargeRequest,
    charge_parameters,
    price_charge,
    settlement_parts,
    write_charge,
)


@dataclass(frozen=True)
class StatusChange:
    """The run's move to `target`, allowed only from `sources`."""

    sources: Collection[RunStatus]
    target: RunStatus
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class StepWrite:
    """Everything one step of a run changes, for the worker holding its lease."""

    run_id: str
    thread_id: str
    worker: str
    now: datetime
    tier: str
    messages: Sequence[dict[str, Any]] = ()
    step_count: int | None = None
    charges: Sequence[ChargeRequest] = ()
    status: StatusChange | None = None
    # Other columns of the run to set (a pre-hold's id cleared once the step has used it).
    run_values: dict[str, Any] = field(default_factory=dict)
    # The model steps this write completes (a `step.completed` event each).
    new_steps: Sequence[int] = ()
    # The runs above this one (nearest first): they take its cost and a copy of its events.
    ancestors: Sequence[str] = ()
    # Runs this one starts (agents it called as tools): `{"thread": ..., "run": ...}` values.
    children: Sequence[dict[str, Any]] = ()
    # The saver's writes held since the last write (the checkpoint of a pause or an end).
    saves: CheckpointSaves | None = None
    # The checkpoint thread whose older checkpoints this write drops (the run pauses or ends).
    prune_thread: str | None = None


# The notices a step's write sends, from the run's row as the write left it (`RUN_STATE_COLUMNS`)
# and the events it appends to the run's log, as the log will hold them (None where that is not
# known: see `run_log.appended_records`).
NoticesOf = Callable[[Mapping[str, Any], Sequence[RunEventRecord] | None], Sequence[Notice]]


@functools.cache
def _step_update(
    sources: tuple[str, ...], columns: tuple[str, ...], add_cost: bool, with_charge: bool = False
) -> Any:
    """The step's UPDATE of its run, under the worker's lease, returning the run's state and
    where its log stands (`run_log.log_tail_columns`); built once per shape. `with_charge`
    (PostgreSQL): the statement also writes the step's ledger row (`usage.CHARGE_WRITTEN`),
    adds its cost to the run's when it was written and returns its id then (`charged_id`)."""
    statement = run_update(
        sources, ("held_by",), columns, add_cost=add_cost, returning=RUN_STATE_COLUMNS
    )
    statement = statement.returning(*log_tail_columns())
    if not with_charge:
        return statement
    cost = select(func.coalesce(func.sum(CHARGE_WRITTEN.c.cost_rupiah), 0)).scalar_subquery()
    charged_id = select(CHARGE_WRITTEN.c.id).scalar_subquery().label("charged_id")
    return (
        statement.add_cte(CHARGE_WRITTEN)
        .values(cost_rupiah=runs.c.cost_rupiah + cost)
        .returning(charged_id)
    )


class _LeaseLost(Exception):
    """Rolls the step back: the run is no longer running under this worker."""


async def record_step(
    engine: Database, step: StepWrite, rules: PriceRules, notices_of: NoticesOf | None = None
) -> bool:
    """Write the step in one transaction, which also sends the notices `notices_of` makes of
    the run as the step leaves it. False (and nothing written) when the run is no longer
    running under `step.worker`'s lease."""
    if step.status is not None:
        for source in step.status.sources:
            check_transition(source, step.status.target)

    messages = message_events(step.thread_id, step.run_id, step.messages, step.now)
    keys = event_keys(messages) + [step_key(number) for number in step.new_steps]

    def work(connection: Connection) -> None:
        priced = [price_charge(connection, charge, rules, step.tier) for charge in step.charges]
        # On PostgreSQL a step's one ledger row goes in with the run's UPDATE; else one each.
        with_charge = len(priced) == 1 and connection.dialect.name == "postgresql"
        charges = [] if with_charge else [write_charge(connection, charge) for charge in priced]
        cost = sum((charge.cost for charge in charges), Decimal(0))
        values: dict[str, Any] = {"updated_at": step.now, **step.run_values}
        sources: tuple[str, ...] = ()
        if step.step_count is not None:
            values["step_count"] = step.step_count
        if step.status is not None:
            values.update(step.status.values, status=step.status.target.value)
            sources = tuple(sorted(source.value for source in step.status.sources))
        guard = RunGuard(held_by=step.worker)
        statement = _step_update(sources, tuple(values), bool(cost), with_charge)
        parameters = run_update_parameters(step.run_id, guard, values, cost if cost else None)
        if with_charge:
            parameters.update(charge_parameters(priced[0]))
        row = connection.execute(statement, {**parameters, "log_keys": keys}).first()
        if row is None:
            raise _LeaseLost
        if with_charge:
            charges = [priced[0].taken(row.charged_id is not None)]
            cost = charges[0].cost
        events = messages + [step_event(number, row.cost_rupiah) for number in step.new_steps]
        # The run's own events: a copy of the others goes up to the ancestors.
        own = [*events, status_event(row._mapping)] if step.status is not None else events
        paused = (
            step.status if step.status and step.status.target == RunStatus.REQUIRES_ACTION else None
        )
        # The notices go out in the statement that appends the run's events (PostgreSQL).
        notices: Sequence[Notice] = ()
        if notices_of is not None:
            appended = appended_records(step.run_id, own, row._mapping, step.now)
            notices = notices_of(dict(row._mapping), appended)
        # What follows reads no result, unless the run starts children or pauses the runs
        # above it: on PostgreSQL it goes out in one round trip instead of one each, and its
        # last parts in one statement (`store.joined`).
        with sent_together(connection, when=not step.children and not (paused and step.ancestors)):
            # The checkpoint of the pause or end, before the pruning that keeps only it.
            if step.saves is not None:
                write_saves(connection, step.saves)
            roll_up(connection, step.ancestors, cost, step.now, events, step.run_id)
            # A run's own write never ends it with a child still active: the write that starts
            # children gives up the run's lease, and a run with an active child is not claimed.
            if step.children:
                insert_children(connection, step.run_id, step.children, step.now)
            if paused is not None:
                pending = paused.values.get("pending_tool_calls") or []
                pause_ancestors(connection, step.ancestors, step.run_id, pending, step.now)
            own_events = [(step.run_id, event) for event in own]
            parts = [
                transcript_part(step.thread_id, step.run_id, step.messages, step.now),
                events_part(own_events, step.now, notices),
                keep_latest_part(step.prune_thread) if step.prune_thread is not None else None,
                # The account's row last: other writes of the account wait for it only to the
                # commit.
                *settlement_parts(charges),
            ]
            write_parts(connection, parts)

    try:
        await write(engine, work)
    except _LeaseLost:
        return False
    return True
