"""Holds on balances: the most a paid call can cost is set aside before the call, so that
concurrent calls can never spend more than the balance, and settled when the call returns.

`accounts.held_rupiah` is the sum of the account's `balance_holds` rows: the column makes
taking a hold one conditional UPDATE (atomic on both databases), the rows let a hold be settled
once and let the holds of a process that died be released when they expire.

A hold's row and the account's update are one statement when a hold is taken and when holds
are given back, with or without a debit, joined with the rest of its write's where it can be
(`store.joined`: on PostgreSQL a data-modifying `WITH`, on SQLite a trigger's statements).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from sqlalchemy import Connection, bindparam, func, select

from juru.store.database import Database
from juru.store.joined import JoinedSql, Part, refusal, write_parts
from juru.store.lists import StringList, postgresql_in_list
from juru.store.tables import balance_holds
from juru.store.transactions import write
from juru.store.types import Money, UtcDateTime


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


# Parts of a joined write (`store.joined`). On PostgreSQL: the conditional UPDATE of the
# account and the hold's row, inserted only when the UPDATE set the amount aside; the holds'
# rows deleted and the account debited (its holds' amounts those of the rows deleted). On
# SQLite, where each statement sees the ones before it: a hold that does not fit refuses the
# part, else the amount set aside and the row written; the account debited by the cost and the
# amounts of the holds named, then their rows deleted.
TAKE = JoinedSql(
    frozenset({"accounts", "balance_holds"}),
    (
        """hold_reserved AS (
            UPDATE accounts SET held_rupiah = accounts.held_rupiah + :hold_amount
            WHERE accounts.id = CAST(:hold_account AS text)
                AND accounts.balance_rupiah - accounts.held_rupiah >= :hold_amount
            RETURNING accounts.id
        )""",
        """hold_written AS (
            INSERT INTO balance_holds
                (id, account_id, amount_rupiah, what, run_id, created_at, expires_at)
            SELECT CAST(:hold_id AS text), hold_reserved.id, :hold_amount,
                CAST(:hold_what AS text), CAST(:hold_run AS text), :hold_created, :hold_expires
            FROM hold_reserved
            RETURNING balance_holds.id
        )""",
    ),
    returns=("EXISTS (SELECT FROM hold_written) AS hold_taken",),
    types=(
        bindparam("hold_amount", type_=Money()),
        bindparam("hold_created", type_=UtcDateTime()),
        bindparam("hold_expires", type_=UtcDateTime()),
    ),
    kind="hold",
    sqlite=(
        f"""SELECT RAISE(ABORT, '{refusal("hold")}') WHERE NOT EXISTS (
            SELECT 1 FROM accounts WHERE accounts.id = :hold_account
                AND accounts.balance_rupiah - accounts.held_rupiah >= :hold_amount
        )""",
        """UPDATE accounts SET held_rupiah = accounts.held_rupiah + :hold_amount
        WHERE accounts.id = :hold_account""",
        """INSERT INTO balance_holds
            (id, account_id, amount_rupiah, what, run_id, created_at, expires_at)
        VALUES (:hold_id, :hold_account, :hold_amount, :hold_what, :hold_run, :hold_created,
            :hold_expires)""",
    ),
    refused_as="hold_taken",
)
DEBIT = JoinedSql(
    frozenset({"accounts", "balance_holds"}),
    (
        f"""debit_released AS (
            DELETE FROM balance_holds
            WHERE {postgresql_in_list("balance_holds.id", ":debit_holds")}
            RETURNING balance_holds.amount_rupiah
        )""",
        """debit_account AS (
            UPDATE accounts SET
                balance_rupiah = accounts.balance_rupiah - :debit_cost,
                held_rupiah = accounts.held_rupiah
                    - (SELECT coalesce(sum(amount_rupiah), 0) FROM debit_released)
            WHERE accounts.id = CAST(:debit_account AS text)
        )""",
    ),
    types=(
        bindparam("debit_cost", type_=Money()),
        bindparam("debit_holds", type_=StringList()),
    ),
    kind="debit",
    sqlite=(
        """UPDATE accounts SET
            balance_rupiah = accounts.balance_rupiah - :debit_cost,
            held_rupiah = accounts.held_rupiah - (
                SELECT coalesce(sum(amount_rupiah), 0) FROM balance_holds
                WHERE balance_holds.id IN (SELECT value FROM json_each(NEW.body, '$.debit_holds'))
            )
        WHERE accounts.id = :debit_account""",
        """DELETE FROM balance_holds
        WHERE balance_holds.id IN (SELECT value FROM json_each(NEW.body, '$.debit_holds'))""",
    ),
)


def take_hold(connection: Connection, hold: Hold) -> bool:
    """Set the hold's amount aside and write its row, if the account's available balance
    (balance less what is held) covers it; False, and nothing written, when it does not.

    This locks the account's row until the commit, and every write of the account's runs
    waits for it (on PostgreSQL): a transaction touches the account last, so the lock is
    held for the commit only, not for its other statements."""
    return bool(write_parts(connection, [hold_part(hold)])["hold_taken"])


def hold_part(hold: Hold) -> Part:
    """`take_hold` as a part of a joined write (`store.joined`), its result `hold_taken`."""
    parameters = {
        "hold_id": hold.id,
        "hold_account": hold.account_id,
        "hold_amount": hold.amount,
        "hold_what": hold.what,
        "hold_run": hold.run_id,
        "hold_created": hold.created_at,
        "hold_expires": hold.expires_at,
    }
    return Part(TAKE, parameters)


def debit(
    connection: Connection, account_id: str, cost: Decimal, hold_ids: Sequence[str] = ()
) -> None:
    """Take `cost` off the account's balance and give back the holds `hold_ids` (deleting
    their rows: a hold settled or released before gives back nothing), as the account's
    last statement in the transaction (`take_hold` on its lock)."""
    write_parts(connection, [debit_part(account_id, cost, hold_ids)])


def debit_part(account_id: str, cost: Decimal, hold_ids: Sequence[str] = ()) -> Part | None:
    """`debit` as a part of a joined write (`store.joined`); None when there is nothing to
    debit or give back."""
    if not cost and not hold_ids:
        return None

    parameters = {"debit_account": account_id, "debit_cost": cost, "debit_holds": list(hold_ids)}
    return Part(DEBIT, parameters)


def release_in(connection: Connection, account_id: str, hold_id: str) -> None:
    """Give the hold back (nothing when it was settled or released before)."""
    debit(connection, account_id, Decimal(0), [hold_id])


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
