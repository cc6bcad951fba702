"""Queries on accounts and their API keys."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, bindparam, func, insert, select, update

from juru.core.ids import new_id
from juru.core.keys import NewKey
from juru.store.database import Database
from juru.store.records import AccountRecord
from juru.store.tables import accounts, api_keys
from juru.store.transactions import write


class AccountExistsError(ValueError):
    """An account with that name exists already."""


async def create_account(
    engine: Database, name: str, tier: str, balance: Decimal, now: datetime
) -> AccountRecord:
    """A new account; its name must be free."""
    values = {
        "id": new_id("acc"),
        "name": name,
        "tier": tier,
        "balance_rupiah": balance,
        "held_rupiah": Decimal(0),
        "created_at": now,
    }

    def insert_unless_taken(connection: Connection) -> None:
        taken = connection.scalar(select(accounts.c.id).where(accounts.c.name == name))
        if taken is not None:
            raise AccountExistsError(f"an account named {name!r} exists already")
        connection.execute(insert(accounts).values(values))

    await write(engine, insert_unless_taken)
    return AccountRecord(**values)  # type: ignore[arg-type]


async def count_accounts(engine: Database) -> int:
    return int(await engine.scalar(select(func.count()).select_from(accounts)) or 0)


async def account_named(engine: Database, name: str) -> AccountRecord | None:
    row = await engine.first_row(select(accounts).where(accounts.c.name == name))
    return None if row is None else AccountRecord.from_row(row)


_BALANCE = select(accounts.c.balance_rupiah).where(accounts.c.id == bindparam("account_id"))


async def balance_of(engine: Database, account_id: str) -> Decimal:
    balance = await engine.scalar(_BALANCE, {"account_id": account_id})
    return Decimal(0) if balance is None else Decimal(balance)


_AVAILABLE = select(accounts.c.balance_rupiah, accounts.c.held_rupiah).where(
    accounts.c.id == bindparam("account_id")
)


async def available_of(engine: Database, account_id: str) -> Decimal:
    """The balance less what paid calls in flight hold."""
    row = await engine.first_row(_AVAILABLE, {"account_id": account_id})
    return Decimal(0) if row is None else row["balance_rupiah"] - row["held_rupiah"]


async def account_by_id(engine: Database, account_id: str) -> AccountRecord | None:
    row = await engine.first_row(select(accounts).where(accounts.c.id == account_id))
    return None if row is None else AccountRecord.from_row(row)


async def top_up(engine: Database, name: str, amount: Decimal) -> AccountRecord | None:
    """Add `amount` to the named account's balance atomically (None: no such account)."""

    def add(connection: Connection) -> Any:
        connection.execute(
            update(accounts)
            .where(accounts.c.name == name)
            .values(balance_rupiah=accounts.c.balance_rupiah + amount)
        )
        return connection.execute(select(accounts).where(accounts.c.name == name)).first()

    row = await write(engine, add)
    return None if row is None else AccountRecord.from_row(row._mapping)


async def insert_api_key(engine: Database, account_id: str, key: NewKey, now: datetime) -> str:
    """Store the key's prefix and hash (never the key); returns the key's id."""
    key_id = new_id("key")
    statement = insert(api_keys).values(
        id=key_id, account_id=account_id, prefix=key.prefix, key_hash=key.key_hash, created_at=now
    )
    await write(engine, lambda connection: connection.execute(statement))
    return key_id


_ACCOUNT_OF_KEY = (
    select(accounts.c.id, accounts.c.tier)
    .join(api_keys, api_keys.c.account_id == accounts.c.id)
    .where(api_keys.c.key_hash == bindparam("key_hash"), api_keys.c.revoked_at.is_(None))
)


async def account_of_key(engine: Database, key_hash: str) -> tuple[str, str] | None:
    """The account id and tier behind a live (not revoked) key with this hash."""

    row = await engine.first_row(_ACCOUNT_OF_KEY, {"key_hash": key_hash})
    return None if row is None else (str(row["id"]), str(row["tier"]))


_KEY_BY_PREFIX = (
    select(api_keys.c.key_hash, accounts.c.id, accounts.c.tier)
    .join(accounts, api_keys.c.account_id == accounts.c.id)
    .where(api_keys.c.prefix == bindparam("prefix"), api_keys.c.revoked_at.is_(None))
)


async def live_key_by_prefix(engine: Database, prefix: str) -> tuple[str, str, str] | None:
    """The hash, account id and tier of the live key with this prefix."""
    row = await engine.first_row(_KEY_BY_PREFIX, {"prefix": prefix})
    return None if row is None else (str(row["key_hash"]), str(row["id"]), str(row["tier"]))


async def revoke_api_key(engine: Database, prefix: str, now: datetime) -> bool:
    """Revoke the live key with this prefix; False if there is none."""
    statement = (
        update(api_keys)
        .where(api_keys.c.prefix == prefix, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    result = await write(engine, lambda connection: connection.execute(statement))
    return result.rowcount > 0
