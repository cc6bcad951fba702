"""`store.holds` on both databases: a hold is taken whole or not at all, and a debit gives back
exactly the holds it names that are still there (each of these one statement: on SQLite the
statements of a trigger, `store.joined`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from juru.store.accounts import account_by_id, create_account
from juru.store.database import Database
from juru.store.holds import Hold, debit, held_total, release_in, take_hold
from juru.store.transactions import write

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def a_hold(hold_id: str, account_id: str, amount: str) -> Hold:
    return Hold(
        hold_id, account_id, Decimal(amount), "openai/gpt-4o-mini", NOW, NOW + timedelta(hours=1)
    )


async def balance_and_held(engine: Database, account_id: str) -> tuple[Decimal, Decimal]:
    account = await account_by_id(engine, account_id)
    assert account is not None
    # `held_rupiah` is the sum of the account's hold rows, whatever was done.
    assert await held_total(engine, account_id) == account.held_rupiah
    return account.balance_rupiah, account.held_rupiah


async def test_a_hold_is_taken_whole_or_not_at_all(store_database: Database) -> None:
    account = await create_account(store_database, "holder", "standard", Decimal(100), NOW)

    async def take_in_a_write(hold: Hold) -> bool:
        return await write(store_database, lambda connection: take_hold(connection, hold))

    assert await take_in_a_write(a_hold("h1", account.id, "60.5"))
    # 39.5 left: a hold of 40 does not fit, and leaves no row behind.
    assert not await take_in_a_write(a_hold("h2", account.id, "40"))
    assert await balance_and_held(store_database, account.id) == (Decimal(100), Decimal("60.5"))
    assert await take_in_a_write(a_hold("h3", account.id, "39.5"))
    assert await balance_and_held(store_database, account.id) == (Decimal(100), Decimal(100))


async def test_a_debit_gives_back_the_holds_still_there_once(store_database: Database) -> None:
    account = await create_account(store_database, "payer", "standard", Decimal(100), NOW)
    other = await create_account(store_database, "other", "standard", Decimal(100), NOW)
    for hold in (
        a_hold("h1", account.id, "30"),
        a_hold("h2", account.id, "20.25"),
        a_hold("h3", account.id, "10"),
        a_hold("o1", other.id, "50"),
    ):
        assert await write(store_database, lambda c, hold=hold: take_hold(c, hold))
    # A charge of 12.5 settling h1 and h2: both given back, the cost taken off the balance.
    await write(store_database, lambda c: debit(c, account.id, Decimal("12.5"), ["h1", "h2"]))
    assert await balance_and_held(store_database, account.id) == (Decimal("87.5"), Decimal(10))
    # Given back twice (a redone step), a hold gives back nothing more; a cost alone is taken.
    await write(store_database, lambda c: debit(c, account.id, Decimal(0), ["h1", "h2"]))
    await write(store_database, lambda c: debit(c, account.id, Decimal("7.5")))
    assert await balance_and_held(store_database, account.id) == (Decimal(80), Decimal(10))
    # A hold given back alone; the other account's balance and holds were never touched.
    await write(store_database, lambda c: release_in(c, account.id, "h3"))
    assert await balance_and_held(store_database, account.id) == (Decimal(80), Decimal(0))
    assert await balance_and_held(store_database, other.id) == (Decimal(100), Decimal(50))
