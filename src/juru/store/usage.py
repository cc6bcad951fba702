"""The usage ledger: one row per charged model call, and its sums."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, Date, bindparam, cast, func, select
from sqlalchemy.dialects.postgresql import insert as postgresql_insert

from juru.core.ids import new_id
from juru.core.money import PriceRules, to_micro
from juru.store.database import Database, dialect_insert
from juru.store.holds import debit_part
from juru.store.joined import Part, write_parts
from juru.store.run_tree import add_run_cost
from juru.store.tables import accounts, usage_charges
from juru.store.transactions import write


@dataclass(frozen=True)
class ChargeRequest:
    """A model call to bill: who, what, where it happened, and its list price."""

    account_id: str
    source: str
    model_id: str
    input_tokens: int
    output_tokens: int
    list_cost: Decimal
    created_at: datetime
    run_id: str | None = None
    step: int | None = None
    # Set where the same call could be charged twice (a step redone after a crash).
    charge_key: str | None = None
    # The hold taken before the call (`store.holds`), settled by this charge.
    hold_id: str | None = None


def month_start(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def monthly_list_spend(connection: Connection, account_id: str, now: datetime) -> Decimal:
    spent = connection.scalar(
        select(func.coalesce(func.sum(usage_charges.c.list_cost_rupiah), 0)).where(
            usage_charges.c.account_id == account_id,
            usage_charges.c.created_at >= month_start(now),
        )
    )
    return Decimal(spent or 0)


# Statements of the step path, built once (their cache keys are computed once).
_TIER = select(accounts.c.tier).where(accounts.c.id == bindparam("account_id"))
_INSERT_CHARGE = {
    dialect: dialect_insert(dialect, usage_charges).on_conflict_do_nothing(
        index_elements=[usage_charges.c.charge_key]
    )
    for dialect in ("sqlite", "postgresql")
}


@dataclass(frozen=True)
class Charge:
    """A charge written to the ledger, still to be settled on its account (`settle`): its
    cost, and the hold it gives back."""

    account_id: str
    cost: Decimal
    hold_id: str | None


@dataclass(frozen=True)
class PricedCharge:
    """A charge priced with the account's discounts: its ledger row, not yet written."""

    request: ChargeRequest
    row: dict[str, Any]

    def taken(self, written: bool) -> Charge:
        """The charge as settled: its cost when its row was written, 0 when its `charge_key`
        was taken before (its hold is given back either way)."""
        cost = self.row["cost_rupiah"] if written else Decimal(0)
        return Charge(self.request.account_id, cost, self.request.hold_id)


def price_charge(
    connection: Connection,
    request: ChargeRequest,
    rules: PriceRules,
    tier: str | None = None,
) -> PricedCharge:
    """The call's cost with the account's discounts (its tier, read when not given, and its
    month's spend where the rules use it), as the ledger row to write."""
    if tier is None:
        tier = str(connection.scalar(_TIER, {"account_id": request.account_id}))
    spent = Decimal(0)
    if rules.uses_monthly_spend:
        spent = monthly_list_spend(connection, request.account_id, request.created_at)
    row = {
        "id": new_id("chg"),
        "account_id": request.account_id,
        "source": request.source,
        "run_id": request.run_id,
        "step": request.step,
        "model_id": request.model_id,
        "input_tokens": request.input_tokens,
        "output_tokens": request.output_tokens,
        "list_cost_rupiah": to_micro(request.list_cost),
        "cost_rupiah": rules.charge(request.list_cost, tier, spent),
        "created_at": request.created_at,
        "charge_key": request.charge_key,
    }
    return PricedCharge(request, row)


def take_charge(
    connection: Connection,
    request: ChargeRequest,
    rules: PriceRules,
    tier: str | None = None,
) -> Charge:
    """Price the call (`price_charge`) and write its ledger row, inside the caller's
    transaction; the account's balance and the call's hold are the caller's to settle
    (`settle`, as the transaction's last statement on the account) and the run's running
    total the caller's to add. A charge whose `charge_key` was taken before is not taken
    again (its hold is still given back): its cost is 0."""
    return write_charge(connection, price_charge(connection, request, rules, tier))


def write_charge(connection: Connection, charge: PricedCharge) -> Charge:
    """Write the priced charge's ledger row, unless its `charge_key` was taken before."""
    inserted = connection.execute(_INSERT_CHARGE[connection.dialect.name], charge.row)
    return charge.taken(bool(inserted.rowcount))


# PostgreSQL: a data-modifying `WITH` that writes one ledger row (its values the parameters
# `charge_<column>`, `charge_parameters`), unless its `charge_key` was taken before; it returns
# the row it wrote (`id`, `cost_rupiah`), for the statement it goes with to add up and return.
# One row only: SQLAlchemy compiles a multi-row VALUES again at every execution (it has no
# cache key), which costs more than the round trip saved.
CHARGE_WRITTEN = (
    postgresql_insert(usage_charges)
    .values({column.name: bindparam(f"charge_{column.name}") for column in usage_charges.c})
    .on_conflict_do_nothing(index_elements=[usage_charges.c.charge_key])
    .returning(usage_charges.c.id, usage_charges.c.cost_rupiah)
    .cte("charged")
)


def charge_parameters(charge: PricedCharge) -> dict[str, Any]:
    """The parameters of `CHARGE_WRITTEN`."""
    return {f"charge_{column}": value for column, value in charge.row.items()}


def settle(connection: Connection, charges: Sequence[Charge]) -> None:
    """Debit the charges' costs and give their holds back, account by account (in the order
    of their ids: `holds.debit`). The account's row stays locked until the commit, and every
    write of the account's runs waits for it (on PostgreSQL): call this last in the
    transaction."""
    write_parts(connection, settlement_parts(charges))


def settlement_parts(charges: Sequence[Charge]) -> list[Part | None]:
    """`settle` as parts of a joined write (`store.joined`), one per account."""
    costs: dict[str, Decimal] = {}
    holds: dict[str, list[str]] = {}
    for charge in charges:
        costs[charge.account_id] = costs.get(charge.account_id, Decimal(0)) + charge.cost
        if charge.hold_id is not None:
            holds.setdefault(charge.account_id, []).append(charge.hold_id)
    return [
        debit_part(account_id, costs[account_id], holds.get(account_id, []))
        for account_id in sorted(costs)
    ]


async def record_charge(engine: Database, request: ChargeRequest, rules: PriceRules) -> Decimal:
    """Take the charge (`take_charge`) and add it to its run's running total, in one
    transaction. Returns the cost taken."""
    return await record_charges(engine, [request], rules)


async def record_charges(
    engine: Database, requests: Sequence[ChargeRequest], rules: PriceRules
) -> Decimal:
    """`record_charge` for several calls in one transaction (a run that is not its worker's
    any more still pays for the calls it made). Returns the total cost taken."""

    def charge(connection: Connection) -> Decimal:
        charges = []
        for request in requests:
            charge = take_charge(connection, request, rules)
            if charge.cost and request.run_id is not None:
                add_run_cost(connection, request.run_id, charge.cost)
            charges.append(charge)
        settle(connection, charges)
        return sum((charge.cost for charge in charges), Decimal(0))

    return await write(engine, charge)


@dataclass(frozen=True)
class UsageLine:
    day: date
    source: str
    model_id: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_rupiah: Decimal


def _day(engine: Database) -> Any:
    if engine.dialect_name == "postgresql":
        return cast(func.timezone("UTC", usage_charges.c.created_at), Date)
    return func.date(usage_charges.c.created_at)


async def usage_by_day(
    engine: Database, account_id: str, since: datetime | None, until: datetime | None
) -> list[UsageLine]:
    """The account's charges summed by day (UTC), source and model, oldest day first."""
    day = _day(engine).label("day")
    query = select(
        day,
        usage_charges.c.source,
        usage_charges.c.model_id,
        func.count().label("calls"),
        func.sum(usage_charges.c.input_tokens).label("input_tokens"),
        func.sum(usage_charges.c.output_tokens).label("output_tokens"),
        func.sum(usage_charges.c.cost_rupiah).label("cost_rupiah"),
    ).where(usage_charges.c.account_id == account_id)
    if since is not None:
        query = query.where(usage_charges.c.created_at >= since)
    if until is not None:
        query = query.where(usage_charges.c.created_at < until)
    query = query.group_by(day, usage_charges.c.source, usage_charges.c.model_id).order_by(
        day, usage_charges.c.source, usage_charges.c.model_id
    )
    return [
        UsageLine(
            day=row["day"] if isinstance(row["day"], date) else date.fromisoformat(str(row["day"])),
            source=row["source"],
            model_id=row["model_id"],
            calls=int(row["calls"]),
            input_tokens=int(row["input_tokens"]),
            output_tokens=int(row["output_tokens"]),
            cost_rupiah=Decimal(row["cost_rupiah"]),
        )
        for row in await engine.rows(query)
    ]


async def charges_of_run(engine: Database, run_id: str) -> list[dict[str, Any]]:
    query = select(usage_charges).where(usage_charges.c.run_id == run_id)
    return [dict(row) for row in await engine.rows(query.order_by(usage_charges.c.step))]
