"""Queries on runs. Every status change is one conditional UPDATE: it happens only if the run
is still in an expected status (and, for a worker, still under its lease), so two processes can
never both move a run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BindParameter,
    Connection,
    String,
    and_,
    bindparam,
    case,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from juru.core.states import ACTIVE, RunStatus, check_transition
from juru.store.database import Database
from juru.store.holds import Hold, debit_part, hold_part
from juru.store.hosted import page_of
from juru.store.joined import Part, write_parts
from juru.store.lists import among, in_list
from juru.store.pages import Page, PageRequest
from juru.store.records import RunRecord
from juru.store.run_log import (
    RunEventRecord,
    append_to_logs,
    appended_records,
    events_part,
    log_tail_columns,
    status_event,
)
from juru.store.run_tree import end_descendants, lock_descendants, withdraw_calls
from juru.store.tables import ACTIVE_RUN_STATUSES, accounts, agents, runs
from juru.store.transactions import Notice, notify, write
from juru.store.types import Money


def _hold_part(hold: Hold | None) -> Part | None:
    return None if hold is None else hold_part(hold)


class ThreadBusyError(RuntimeError):
    """The thread already has a queued, running or waiting run."""


# The reads every poll and every step make, built once (their cache keys are computed once).
_RUN = select(runs).where(runs.c.id == bindparam("run_id"))
_ACCOUNTS_RUN = _RUN.where(runs.c.account_id == bindparam("account_id"))
_RUN_BY_KEY = select(runs).where(
    runs.c.thread_id == bindparam("thread_id"), runs.c.idempotency_key == bindparam("key")
)


async def _select_run(engine: Database, query: Any, parameters: dict[str, Any]) -> RunRecord | None:
    row = await engine.first_row(query, parameters)
    return None if row is None else RunRecord.from_row(row)


async def get_run(engine: Database, run_id: str, account_id: str | None = None) -> RunRecord | None:
    """The run, if it exists (and belongs to `account_id` when one is given)."""
    if account_id is None:
        return await _select_run(engine, _RUN, {"run_id": run_id})
    return await _select_run(engine, _ACCOUNTS_RUN, {"run_id": run_id, "account_id": account_id})


async def find_by_idempotency_key(engine: Database, thread_id: str, key: str) -> RunRecord | None:
    return await _select_run(engine, _RUN_BY_KEY, {"thread_id": thread_id, "key": key})


async def _returning_run(engine: Database, statement: Any) -> RunRecord | None:
    def execute(connection: Connection) -> Any:
        return connection.execute(statement).first()

    row = await write(engine, execute)
    return None if row is None else RunRecord.from_row(row._mapping)


async def create_run(
    engine: Database,
    values: dict[str, Any],
    hold: Hold | None = None,
    notices: Sequence[Notice] = (),
) -> tuple[RunRecord, bool]:
    """Insert a queued run; with an idempotency key already used on the thread, return that run.

    Returns the run and whether it was created now. Raises ThreadBusyError when another run of
    the thread is active. Concurrent duplicates are settled by the unique constraints. `hold`,
    when given and when it fits, is taken in the same transaction for the run's first call;
    `notices` are sent by the creating transaction only.
    """
    key = values.get("idempotency_key")
    if key is not None:
        existing = await find_by_idempotency_key(engine, values["thread_id"], key)
        if existing is not None:
            return existing, False
    try:
        created = await _insert_holding(engine, values, hold, notices)
    except IntegrityError:
        if key is not None:
            existing = await find_by_idempotency_key(engine, values["thread_id"], key)
            if existing is not None:
                return existing, False
        raise ThreadBusyError(values["thread_id"]) from None
    assert created is not None
    return created, True


# Every run's creation: built once (its columns are those of the values given, compiled once
# per set of them).
_INSERT_RUN = insert(runs).returning(*runs.c)


async def _insert_holding(
    engine: Database, values: dict[str, Any], hold: Hold | None, notices: Sequence[Notice]
) -> RunRecord:
    def insert_run(connection: Connection) -> RunRecord:
        row_values = dict(values)
        if hold is not None:
            row_values.update(hold_id=hold.id, hold_rupiah=hold.amount)
        row = connection.execute(_INSERT_RUN, row_values).one()
        created = [(row.id, status_event(row._mapping))]
        # The account's row last: other writes of the account wait for it only to the commit.
        # On PostgreSQL the event and the hold go in one statement (`store.joined`).
        parts = [events_part(created, row.created_at, notices), _hold_part(hold)]
        written = write_parts(connection, parts)
        if hold is not None and not written["hold_taken"]:
            row = connection.execute(_WITHOUT_HOLD, {"run_id": row.id}).one()
        return RunRecord.from_row(row._mapping)

    return await write(engine, insert_run)


async def active_runs_of_agent(engine: Database, account_id: str, agent_id: str) -> list[str]:
    """The ids of the agent's runs that have not ended."""
    query = select(runs.c.id).where(
        runs.c.account_id == account_id,
        runs.c.agent_id == agent_id,
        among(runs.c.status, ACTIVE_RUN_STATUSES),
    )
    return [str(row["id"]) for row in await engine.rows(query)]


async def list_runs(
    engine: Database, account_id: str, thread_id: str, page: PageRequest
) -> Page[RunRecord]:
    query = select(runs).where(runs.c.account_id == account_id, runs.c.thread_id == thread_id)
    rows = await engine.read(lambda connection: page_of(connection, runs, query, page))
    return Page([RunRecord.from_row(row) for row in rows.items], rows.has_more)


async def list_account_runs(
    engine: Database, account_id: str, parent_run_id: str | None, page: PageRequest
) -> Page[RunRecord]:
    """The account's runs (those `parent_run_id` started, when it is given), in `page`'s order."""
    query = select(runs).where(runs.c.account_id == account_id)
    if parent_run_id is not None:
        query = query.where(runs.c.parent_run_id == parent_run_id)
    rows = await engine.read(lambda connection: page_of(connection, runs, query, page))
    return Page([RunRecord.from_row(row) for row in rows.items], rows.has_more)


@dataclass(frozen=True)
class RunGuard:
    """What must still hold for a status change to apply, besides the run's status."""

    held_by: str | None = None
    pause_count: int | None = None
    waiting_before: datetime | None = None
    deadline_before: datetime | None = None

    def names(self) -> tuple[str, ...]:
        """The guards set, as `run_update` takes them."""
        return tuple(name for name in _GUARD_CONDITIONS if getattr(self, name) is not None)

    def parameters(self) -> dict[str, Any]:
        """The guard's values, by the names of `run_update`'s parameters."""
        return {
            f"guard_{name}": value
            for name in _GUARD_CONDITIONS
            if (value := getattr(self, name)) is not None
        }


# Each guard's condition, on a parameter `guard_<name>`.
_GUARD_CONDITIONS: dict[str, Any] = {
    "held_by": and_(
        runs.c.status == RunStatus.RUNNING.value,
        runs.c.lease_owner == bindparam("guard_held_by"),
    ),
    "pause_count": runs.c.pause_count == bindparam("guard_pause_count"),
    "waiting_before": runs.c.waiting_since < bindparam("guard_waiting_before"),
    "deadline_before": runs.c.deadline_at < bindparam("guard_deadline_before"),
}


@lru_cache(maxsize=256)
def run_update(
    sources: tuple[str, ...],
    guards: tuple[str, ...],
    columns: tuple[str, ...],
    add_cost: bool = False,
    returning: tuple[str, ...] | None = None,
) -> Any:
    """The UPDATE of one run (`run_id`), built once per shape: only if it is in one of
    `sources` (any status when empty) and its `guards` hold (`RunGuard.parameters`); sets each
    of `columns` to the parameter `set_<column>`, adds `added_cost` to its cost when
    `add_cost`; returns the `returning` columns (all when None). Building a statement and its
    cache key costs more than running it: the step path's writes reuse one per shape."""
    conditions = [runs.c.id == bindparam("run_id"), *(_GUARD_CONDITIONS[g] for g in guards)]
    if sources:
        conditions.append(among(runs.c.status, sources))
    values: dict[str, Any] = {column: bindparam(f"set_{column}") for column in columns}
    if add_cost:
        values["cost_rupiah"] = runs.c.cost_rupiah + bindparam("added_cost", type_=Money())
    shown = runs.c if returning is None else [runs.c[column] for column in returning]
    return update(runs).where(*conditions).values(values).returning(*shown)


def run_update_parameters(
    run_id: str, guard: RunGuard, values: dict[str, Any], added_cost: Decimal | None = None
) -> dict[str, Any]:
    """The parameters of a `run_update` statement of the matching shape."""
    parameters = {"run_id": run_id, **guard.parameters()}
    parameters.update({f"set_{column}": value for column, value in values.items()})
    if added_cost is not None:
        parameters["added_cost"] = added_cost
    return parameters


# The notices a status change sends, from the run's row as the change left it and the event
# it appends to the run's log as the log will hold it (None where that is not known).
TransitionNotices = Callable[[Mapping[str, Any], Sequence[RunEventRecord] | None], Sequence[Notice]]


@lru_cache(maxsize=256)
def _transition_update(
    sources: tuple[str, ...], guards: tuple[str, ...], columns: tuple[str, ...], handing: bool
) -> Any:
    """A status change's UPDATE, returning the run and where its log stands
    (`run_log.log_tail_columns`: its one event, the status, has no key), and when `handing`
    the run to a worker what a claim returns besides its row (`_AGENT_REVISION`,
    `_ACCOUNT_TIER`); built once per shape."""
    statement = run_update(sources, guards, columns).returning(*log_tail_columns(keyed=False))
    return statement.returning(_AGENT_REVISION, _ACCOUNT_TIER) if handing else statement


# A run's hold that did not fit, forgotten (the run takes one when it is claimed).
_WITHOUT_HOLD = (
    update(runs)
    .where(runs.c.id == bindparam("run_id"))
    .values(hold_id=None, hold_rupiah=None)
    .returning(*runs.c)
)


class _NotMoved(Exception):
    """Rolls a transition back: the run was not in an expected status any more."""


class _HoldDidNotFit(Exception):
    """Rolls a transition back: the hold it was to take did not fit in the balance, and its
    notices name the hold (the move is made again without it)."""


async def transition_run(
    engine: Database,
    run_id: str,
    sources: Collection[RunStatus],
    target: RunStatus,
    now: datetime,
    values: dict[str, Any] | None = None,
    guard: RunGuard | None = None,
    *,
    hold: Hold | None = None,
    release_unclaimed_hold: bool = False,
    notices_of: TransitionNotices | None = None,
    handing: bool = False,
    ended_below: list[str] | None = None,
    wall_clock_seconds: float = 600.0,
) -> RunRecord | None:
    """Move the run to `target` if it is in one of `sources` (and `guard` holds).

    Returns the updated run, or None (and nothing written) when it was not in an expected
    status any more. An edge the state machine does not have raises IllegalTransitionError
    before any write. In the same transaction: `hold`, when given and when it fits, is taken
    for the run's next model call (its pre-hold); `release_unclaimed_hold` gives back a
    pre-hold that no worker has leased (a worker's own holds are its to settle); the notices
    `notices_of` makes of the run as the move left it go out when it commits (a hold that did
    not fit is not in them: the move is made again without it). `handing`: the move hands the
    run to a worker, and the row its notices are made of has what a claim returns besides the
    run's (`_AGENT_REVISION`, `_ACCOUNT_TIER`). A run that ends cancels the runs it started,
    and takes its calls (and theirs) off the ancestors showing them (the ids of the runs
    changed so are added to `ended_below`; an ancestor left with no calls gets
    `wall_clock_seconds`).
    """
    for source in sources:
        check_transition(source, target)
    changes = {"status": target.value, "updated_at": now, **(values or {})}
    guard = guard or RunGuard()
    source_values = tuple(sorted(source.value for source in sources))

    def move(connection: Connection, hold: Hold | None) -> RunRecord:
        if target.is_terminal:
            lock_descendants(connection, run_id)
        values = dict(changes)
        unclaimed = None
        if release_unclaimed_hold:
            unclaimed = connection.execute(
                select(runs.c.hold_id, runs.c.account_id)
                .where(runs.c.id == run_id, runs.c.lease_owner.is_(None))
                .with_for_update()
            ).first()
            if unclaimed is not None:
                # A leased run keeps naming its pre-hold: the worker holding the lease gives it
                # back, even one that has not taken the run up yet (`handed_runs`).
                values.update(hold_id=None, hold_rupiah=None)
        if hold is not None:
            values.update(hold_id=hold.id, hold_rupiah=hold.amount)
        statement = _transition_update(source_values, guard.names(), tuple(values), handing)
        parameters = run_update_parameters(run_id, guard, values)
        row = connection.execute(statement, parameters).first()
        if row is None:
            raise _NotMoved
        event = status_event(row._mapping)
        notices: Sequence[Notice] = ()
        if notices_of is not None:
            appended = appended_records(run_id, [event], row._mapping, now)
            notices = notices_of(dict(row._mapping), appended)
        logged = events_part([(run_id, event)], now, notices)
        if target.is_terminal:
            write_parts(connection, [logged])
            logged = None
            ended = end_descendants(connection, run_id, now)
            if row.parent_run_id is not None:
                gone = {run_id, *ended}
                ended += withdraw_calls(connection, run_id, gone, now, wall_clock_seconds)
            if ended_below is not None:
                ended_below.extend(ended)
        # The account's row last: other writes of the account wait for it only to the commit.
        # On PostgreSQL the event and the hold go in one statement (`store.joined`).
        parts = [logged, _hold_part(hold)]
        if unclaimed is not None and unclaimed.hold_id is not None:
            parts.append(debit_part(unclaimed.account_id, Decimal(0), [unclaimed.hold_id]))
        written = write_parts(connection, parts)
        if hold is not None and not written["hold_taken"]:
            raise _HoldDidNotFit
        return RunRecord.from_row(row._mapping)

    try:
        try:
            return await write(engine, lambda connection: move(connection, hold))
        except _HoldDidNotFit:
            return await write(engine, lambda connection: move(connection, None))
    except _NotMoved:
        return None


# What a worker needs of a claimed run's agent, without a read of its own when it knows the
# agent in this revision already: the agent's `revision`, and the tier that prices its calls.
_AGENT_REVISION = (
    select(agents.c.revision)
    .where(agents.c.id == runs.c.agent_id, agents.c.account_id == runs.c.account_id)
    .scalar_subquery()
    .label("agent_revision")
)
_ACCOUNT_TIER = (
    select(accounts.c.tier).where(accounts.c.id == runs.c.account_id).scalar_subquery()
).label("account_tier")


def _claim_statement(dialect_name: str) -> Any:
    """The claim's UPDATE, built once per dialect (its parameters: `worker`, `claim_now`,
    `claim_until`, `claim_limit`)."""
    now: BindParameter[datetime] = bindparam("claim_now")
    child = runs.alias("child")
    waits_for_a_child = (
        select(child.c.id)
        .where(
            child.c.parent_run_id == runs.c.id,
            among(child.c.status, [status.value for status in ACTIVE]),
        )
        .exists()
    )
    claimable = or_(
        runs.c.status == RunStatus.QUEUED.value,
        and_(
            runs.c.status == RunStatus.RUNNING.value,
            or_(runs.c.lease_owner.is_(None), runs.c.lease_expires_at < now),
            # A run whose agent called other agents waits, unleased, for their runs to end.
            ~waits_for_a_child,
        ),
    )
    candidates = (
        select(runs.c.id).where(claimable).order_by(runs.c.id).limit(bindparam("claim_limit"))
    )
    if dialect_name == "postgresql":
        # A materialised CTE is evaluated once; PostgreSQL may run an IN (subquery) again
        # and take more than `limit` rows.
        chosen = (
            candidates.with_for_update(skip_locked=True)
            .cte("chosen")
            .prefix_with("MATERIALIZED", dialect="postgresql")
        )
        picked: Any = runs.c.id.in_(select(chosen.c.id))
    else:
        picked = runs.c.id.in_(candidates.scalar_subquery())
    return (
        update(runs)
        .where(picked, claimable)
        .values(
            status=RunStatus.RUNNING.value,
            lease_owner=bindparam("worker"),
            last_worker=bindparam("worker"),
            lease_expires_at=bindparam("claim_until"),
            attempts=runs.c.attempts + 1,
            updated_at=now,
        )
        .returning(*runs.c, _AGENT_REVISION, _ACCOUNT_TIER)
    )


_CLAIM = {dialect: _claim_statement(dialect) for dialect in ("sqlite", "postgresql")}


@dataclass(frozen=True)
class ClaimNotice:
    """What a claim tells the other processes (a notice on `channel`): `first`
    followed by the run's id for a run claimed for the first time (queued → running), `again`
    followed by its id for a run taken (back) whose lease only moved."""

    channel: str
    first: str
    again: str

    def of(self, run_id: str, attempts: int) -> str:
        """The payload for one claimed run (as the PostgreSQL statement makes it)."""
        return (self.first if attempts == 1 else self.again) + run_id


# The claim that sends its notices itself, one per run in its RETURNING (PostgreSQL): no
# statement of their own in the claim's transaction.
_NOTICE_PAYLOAD = case(
    (runs.c.attempts == 1, bindparam("notice_first", type_=String())),
    else_=bindparam("notice_again", type_=String()),
).concat(runs.c.id)
_CLAIM_NOTIFYING = _CLAIM["postgresql"].returning(
    func.pg_notify(bindparam("notice_channel", type_=String()), _NOTICE_PAYLOAD).label("noticed")
)


async def claim_runs(
    engine: Database,
    worker: str,
    now: datetime,
    lease_seconds: float,
    limit: int = 1,
    notice: ClaimNotice | None = None,
) -> list[RunRecord]:
    """Take up to `limit` of the oldest runs that need a worker (queued, resumed, or left by a
    dead worker) in one statement; fewer than `limit` means none is left (a run waiting for a
    child run it started is not claimable until the child ended). With `notice`, the claim's
    transaction tells the other processes of each run it claimed (on PostgreSQL its statement
    itself)."""
    check_transition(RunStatus.QUEUED, RunStatus.RUNNING)
    statement = _CLAIM[engine.dialect_name]
    parameters: dict[str, Any] = {
        "worker": worker,
        "claim_now": now,
        "claim_until": now + timedelta(seconds=lease_seconds),
        "claim_limit": limit,
    }
    told_by_statement = engine.dialect_name == "postgresql"
    if notice is not None and told_by_statement:
        statement = _CLAIM_NOTIFYING
        parameters.update(
            notice_channel=notice.channel, notice_first=notice.first, notice_again=notice.again
        )

    def execute(connection: Connection) -> list[RunRecord]:
        rows = connection.execute(statement, parameters).all()
        if notice is not None and not told_by_statement:
            notify(connection, [(notice.channel, notice.of(row.id, row.attempts)) for row in rows])
        # Only a claim makes `attempts` grow: 1 means the run was queued until now.
        started = [(row.id, status_event(row._mapping)) for row in rows if row.attempts == 1]
        append_to_logs(connection, started, now)
        return sorted((RunRecord.from_row(row._mapping) for row in rows), key=lambda r: r.id)

    # A claim that only moves leases (a resumed run's, a lapsed one's) tells nobody outside
    # Juru's processes anything; one that starts a queued run appends its status event, which
    # streams show at once: that one is synced.
    return await write(engine, execute, unsynced_if=_moves_only_leases)


def _moves_only_leases(claimed: list[RunRecord]) -> bool:
    return all(run.attempts > 1 for run in claimed)


_HANDED = select(runs, _AGENT_REVISION, _ACCOUNT_TIER).where(in_list(runs.c.id, "run_ids"))


async def handed_runs(engine: Database, run_ids: Sequence[str]) -> list[RunRecord]:
    """The runs as a worker they were handed to (`RunMachine.submit_tool_outputs`) takes them
    up: with what a claim returns besides their rows (the agent's revision, the account's
    tier); one read for all of them, the lease being the worker's since the write that resumed
    each run."""
    if not run_ids:
        return []
    rows = await engine.rows(_HANDED, {"run_ids": list(run_ids)})
    return [RunRecord.from_row(row) for row in rows]


async def renew_lease(
    engine: Database, run_id: str, worker: str, now: datetime, lease_seconds: float
) -> bool:
    """Extend the worker's lease; False when the run is no longer running under it."""
    statement = run_update((), ("held_by",), ("lease_expires_at",), returning=("id",))
    parameters = run_update_parameters(
        run_id,
        RunGuard(held_by=worker),
        {"lease_expires_at": now + timedelta(seconds=lease_seconds)},
    )
    row = await write(engine, lambda connection: connection.execute(statement, parameters).first())
    return row is not None


async def overdue_runs(
    engine: Database, now: datetime, waiting_cutoff: datetime, limit: int = 100
) -> list[RunRecord]:
    """Runs past their wall-clock deadline, or waiting for tool outputs since before the cutoff."""
    waiting_too_long = and_(
        runs.c.status == RunStatus.REQUIRES_ACTION.value, runs.c.waiting_since < waiting_cutoff
    )
    over_deadline = and_(
        among(runs.c.status, [RunStatus.QUEUED.value, RunStatus.RUNNING.value]),
        runs.c.deadline_at < now,
    )
    query = select(runs).where(or_(waiting_too_long, over_deadline)).limit(limit)
    return [RunRecord.from_row(row) for row in await engine.rows(query)]
