"""Holds on balances: the most a paid call can cost is set aside before the call, so that
concurrent calls can never spend more than the balance, and settled when the call returns.

`accounts.held_rupiah` is the sum of the account's `balance_holds` rows: the column makes
taking a hold one conditional UPDATE (atomic on both databases), the rows let a hold be settled
once and let the holds of a process that died be released when they expire.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from juru.store.database import Database
from juru.store.tables import accounts, balance_holds
from juru.store.transactions import write
from juru.store.types import Money


@dataclass(frozen=True)
class Hold:
    """A hold to take: `amount` of `account_id`'s balance, for a call to `what`."""

    id: str
    account_id: str
    amount: Decimal
    what: str
    created_at: datetime
    expires_at: datetime
    run_id: str | None = None


_TAKE = (
    update(accounts)
    .where(
        accounts.c.id == bindparam("account_id"),
        accounts.c.balance_rupiah - accounts.c.held_rupiah >= bindparam("amount", type_=Money()),
    )
    .values(held_rupiah=accounts.c.held_rupiah + bindparam("amount", type_=Money()))
)

# Statements of the step path, built once (their cache keys are computed once).
_INSERT = insert(balance_holds)
_REMOVE = (
    delete(balance_holds)
    .where(balance_holds.c.id == bindparam("hold_id"))
    .returning(balance_holds.c.amount_rupiah)
)
_GIVE_BACK = (
    update(accounts)
    .where(accounts.c.id == bindparam("account_id"))
    .values(held_rupiah=accounts.c.held_rupiah - bindparam("amount", type_=Money()))
)


def insert_hold(connection: Connection, hold: Hold) -> None:
    """The hold's row; `reserve` then sets its amount aside on the account."""
    connection.execute(
        _INSERT,
        {
            "id": hold.id,
            "account_id": hold.account_id,
            "amount_rupiah": hold.amount,
            "what": hold.what,
            "run_id": hold.run_id,
            "created_at": hold.created_at,
            "expires_at": hold.expires_at,
        },
    )


def reserve(connection: Connection, hold: Hold) -> bool:
    """Set the amount of a hold inserted in this transaction (`insert_hold`) aside, if the
    account's available balance (balance less what is held) covers it; when it does not,
    delete the hold's row and return False.

    This locks the account's row until the commit, and every write of the account's runs
    waits for it (on PostgreSQL): a transaction touches the account last, so the lock is
    held for the commit only, not for its other statements."""
    taken = connection.execute(_TAKE, {"account_id": hold.account_id, "amount": hold.amount})
    if taken.rowcount:
        return True
    remove_hold(connection, hold.id)
    return False


def take_hold(connection: Connection, hold: Hold) -> bool:
    """`insert_hold` and `reserve`: the hold is set aside, or nothing is written."""
    insert_hold(connection, hold)
    return reserve(connection, hold)


def remove_hold(connection: Connection, hold_id: str) -> Decimal:
    """Delete the hold's row and return its amount (0 when it was settled or released
    before): the caller takes the amount off `accounts.held_rupiah` in the same transaction."""
    removed = connection.execute(_REMOVE, {"hold_id": hold_id}).first()
    return Decimal(0) if removed is None else Decimal(removed[0])


def give_back(connection: Connection, account_id: str, amount: Decimal) -> None:
    """Take `amount` of removed holds off what the account holds (`reserve` on the lock)."""
    if amount:
        connection.execute(_GIVE_BACK, {"account_id": account_id, "amount": amount})


def release_in(connection: Connection, account_id: str, hold_id: str) -> None:
    give_back(connection, account_id, remove_hold(connection, hold_id))


async def hold(engine: Database, hold: Hold, replacing: str | None = None) -> bool:
    """`take_hold` in a transaction of its own, giving back the hold `replacing` first."""

    def replace_and_take(connection: Connection) -> bool:
        if replacing is not None:
            release_in(connection, hold.account_id, replacing)
        return take_hold(connection, hold)

    return await write(engine, replace_and_take)


async def release(engine: Database, account_id: str, hold_ids: list[str]) -> None:
    """Give the holds back without a charge (the call failed or never happened)."""

    def release_all(connection: Connection) -> None:
        for hold_id in hold_ids:
            release_in(connection, account_id, hold_id)

    if hold_ids:
        await write(engine, release_all)


async def release_expired(engine: Database, now: datetime, batch: int = 500) -> int:
    """Release holds past their expiry (their process died before settling them); returns
    how many were found. A sweep that finds none writes nothing."""
    expired = await engine.rows(
        select(balance_holds.c.id, balance_holds.c.account_id)
        .where(balance_holds.c.expires_at < now)
        .order_by(balance_holds.c.expires_at)
        .limit(batch)
    )

    def release_batch(connection: Connection) -> None:
        # A hold settled since the read is gone: releasing it again changes nothing.
        for row in expired:
            release_in(connection, row["account_id"], row["id"])

    if expired:
        await write(engine, release_batch)
    return len(expired)


async def held_total(engine: Database, account_id: str) -> Decimal:
    """The sum of the account's hold rows (what `held_rupiah` must equal)."""
    total = await engine.scalar(
        select(func.coalesce(func.sum(balance_holds.c.amount_rupiah), 0)).where(
            balance_holds.c.account_id == account_id
        )
    )
    return Decimal(total)
