"""The usage ledger: one row per charged model call, and its sums."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Date, cast, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from juru.store.tables import runs, usage_charges
from juru.store.transactions import write


async def record_charge(engine: AsyncEngine, values: dict[str, Any]) -> None:
    """Insert the charge and add it to its run's running total, in one transaction."""

    async def charge(connection: AsyncConnection) -> None:
        await connection.execute(insert(usage_charges).values(values))
        if values.get("run_id") is not None:
            await connection.execute(
                update(runs)
                .where(runs.c.id == values["run_id"])
                .values(cost_rupiah=runs.c.cost_rupiah + values["cost_rupiah"])
            )

    await write(engine, charge)


@dataclass(frozen=True)
class UsageLine:
    day: date
    source: str
    model_id: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_rupiah: Decimal


def _day(engine: AsyncEngine) -> Any:
    if engine.dialect.name == "postgresql":
        return cast(func.timezone("UTC", usage_charges.c.created_at), Date)
    return func.date(usage_charges.c.created_at)


async def usage_by_day(
    engine: AsyncEngine, account_id: str, since: datetime | None, until: datetime | None
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
    async with engine.connect() as connection:
        rows = (await connection.execute(query)).all()
    return [
        UsageLine(
            day=row.day if isinstance(row.day, date) else date.fromisoformat(str(row.day)),
            source=row.source,
            model_id=row.model_id,
            calls=int(row.calls),
            input_tokens=int(row.input_tokens),
            output_tokens=int(row.output_tokens),
            cost_rupiah=Decimal(row.cost_rupiah),
        )
        for row in rows
    ]


async def charges_of_run(engine: AsyncEngine, run_id: str) -> list[dict[str, Any]]:
    async with engine.connect() as connection:
        rows = (
            await connection.execute(
                select(usage_charges)
                .where(usage_charges.c.run_id == run_id)
                .order_by(usage_charges.c.step)
            )
        ).all()
    return [dict(row._mapping) for row in rows]
