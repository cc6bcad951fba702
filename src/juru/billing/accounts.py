"""Account administration behind `juru accounts ...` and `juru keys ...`, and the local
account a fresh SQLite install starts with."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from juru.core.clock import Clock
from juru.core.keys import KEY_PREFIX, is_well_formed, key_prefix, new_key
from juru.core.money import to_micro
from juru.store import accounts as store
from juru.store.database import Database
from juru.store.records import AccountRecord
from juru.store.urls import DatabaseUrl

logger = logging.getLogger(__name__)
LOCAL_ACCOUNT = "local"
LOCAL_KEY_FILE = "local-api-key"


def local_key_path(database: DatabaseUrl) -> Path | None:
    """Where a SQLite install keeps the key of its `local` account (none on PostgreSQL)."""
    return database.sqlite_path.parent / LOCAL_KEY_FILE if database.is_sqlite else None


class AccountAdminError(ValueError):
    """A request the administration commands refuse, with the reason."""


def parse_rupiah(text: str) -> Decimal:
    """An amount of Rupiah typed by an operator: a decimal with at most six places."""
    try:
        amount = Decimal(text.replace("_", ""))
    except InvalidOperation:
        raise AccountAdminError(f"{text!r} is not an amount of Rupiah") from None
    if not amount.is_finite() or to_micro(amount) != amount:
        raise AccountAdminError(f"{text!r}: use at most six decimal places")
    return amount


@dataclass(frozen=True)
class IssuedKey:
    account: AccountRecord
    secret: str
    prefix: str


class AccountAdmin:
    def __init__(
        self,
        engine: Database,
        clock: Clock,
        tiers: Collection[str],
        on_revoke: Callable[[str], None] | None = None,
    ) -> None:
        self.engine = engine
        self.clock = clock
        self.tiers = tiers
        # Told each revoked key's prefix, so this process's key cache drops it at once.
        self.on_revoke = on_revoke

    async def create_account(self, name: str, tier: str, balance: Decimal) -> AccountRecord:
        if not name.strip():
            raise AccountAdminError("an account needs a name")
        if tier not in self.tiers:
            raise AccountAdminError(f"unknown tier {tier!r}; configured: {', '.join(self.tiers)}")
        if balance < 0:
            raise AccountAdminError("a new account's balance cannot be negative")
        try:
            return await store.create_account(self.engine, name, tier, balance, self.clock.now())
        except store.AccountExistsError as error:
            raise AccountAdminError(str(error)) from None

    async def top_up(self, name: str, amount: Decimal) -> AccountRecord:
        if amount <= 0:
            raise AccountAdminError("a top-up must be a positive amount")
        account = await store.top_up(self.engine, name, amount)
        if account is None:
            raise AccountAdminError(f"no account named {name!r}")
        return account

    async def create_key(self, account_name: str) -> IssuedKey:
        account = await store.account_named(self.engine, account_name)
        if account is None:
            raise AccountAdminError(f"no account named {account_name!r}")
        key = new_key()
        await store.insert_api_key(self.engine, account.id, key, self.clock.now())
        return IssuedKey(account, key.secret, key.prefix)

    async def revoke_key(self, prefix_or_key: str) -> str:
        """Revoke by the key's prefix (as listed) or by the whole key; returns the prefix."""
        prefix = key_prefix(prefix_or_key) if is_well_formed(prefix_or_key) else prefix_or_key
        if not prefix.startswith(KEY_PREFIX):
            raise AccountAdminError(f"key prefixes start with {KEY_PREFIX!r}")
        if not await store.revoke_api_key(self.engine, prefix, self.clock.now()):
            raise AccountAdminError(f"no live key with prefix {prefix!r}")
        if self.on_revoke is not None:
            self.on_revoke(prefix)
        return prefix

    async def bootstrap_local(
        self, key_file: Path, balance: Decimal = Decimal(0)
    ) -> IssuedKey | None:
        """On a database with no account at all: the `local` account and a key, written to
        `key_file` (readable by its owner only). Never when any account exists, nor when
        another process of the same start (`juru serve` and its workers) makes it first."""
        if await store.count_accounts(self.engine) > 0:
            return None
        try:
            await store.create_account(
                self.engine, LOCAL_ACCOUNT, "paid", balance, self.clock.now()
            )
        except store.AccountExistsError:
            return None
        issued = await self.create_key(LOCAL_ACCOUNT)
        key_file.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as handle:
            handle.write(issued.secret + "\n")
        logger.warning(
            "created the account %r with the API key %s (also in %s): keep it, it is shown once",
            LOCAL_ACCOUNT,
            issued.secret,
            key_file,
        )
        return issued
