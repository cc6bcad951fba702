"""Billing (section 7 of the hosted-agents document): a hold before every paid step, charges
kept when a run fails, discounts, exact money (concurrency: `test_balance_holds`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from sqlalchemy import select

from juru.app import create_app
from juru.core.clock import ManualClock
from juru.settings import Settings
from juru.store.accounts import account_named, balance_of
from juru.store.tables import usage_charges
from juru.store.usage import charges_of_run
from tests.conftest import openai_env, start_client
from tests.integration.test_run_engine import OPENAI_MODEL, WEATHER_CALL
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import WEATHER_TOOL, HostedHarness


async def use_account(hosted: HostedHarness, name: str, balance: Decimal | str) -> str:
    hosted.act_as(await hosted.new_account(name, balance=Decimal(balance)))
    account = await account_named(hosted.context.engine, name)
    assert account is not None
    return account.id


def ledger_sum(charges: list[dict[str, Any]]) -> Decimal:
    return sum((Decimal(c["cost_rupiah"]) for c in charges), Decimal(0))


async def test_a_step_whose_hold_does_not_fit_fails_the_run_before_the_model(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    meter = hosted.context.meter
    # The first step holds the most its call can cost; the balance covers that and half of
    # what the step really costs, so after it the second step's hold does not fit.
    first_hold = meter.most_a_call_costs(
        OPENAI_MODEL, [HumanMessage("What is the weather in Jakarta?")], [WEATHER_TOOL]
    )
    fake_openai.script([WEATHER_CALL])
    probe = await hosted.new_run(model_id=OPENAI_MODEL)
    await hosted.work()
    first_cost = Decimal(str((await hosted.get_run(probe["id"]))["cost_rupiah"]))
    opening = first_hold + (first_cost / 2).quantize(Decimal("0.000001"))
    account_id = await use_account(hosted, "thrifty", opening)
    fake_openai.script([WEATHER_CALL, {"content": "never asked"}])
    run = await hosted.new_run(model_id=OPENAI_MODEL)
    await hosted.work()
    paused = await hosted.get_run(run["id"])
    assert paused["status"] == "requires_action"
    assert Decimal(str(paused["cost_rupiah"])) == first_cost

    await hosted.answer(paused)
    await hosted.work()
    failed = await hosted.get_run(run["id"])
    assert (failed["status"], failed["error"]) == ("failed", "insufficient_balance")
    assert failed["step_count"] == 1
    assert len(fake_openai.requests()) == 2, "the run's second step must not reach the model"

    charges = await charges_of_run(hosted.context.engine, run["id"])
    assert [c["step"] for c in charges] == [1]
    assert Decimal(str(failed["cost_rupiah"])) == ledger_sum(charges)
    balance = await balance_of(hosted.context.engine, account_id)
    assert balance == opening - ledger_sum(charges) > 0


async def test_a_run_without_funds_never_calls_a_paid_model(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    await use_account(hosted_openai, "broke", "0")
    run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
    await hosted_openai.work()
    failed = await hosted_openai.get_run(run["id"])
    assert (failed["status"], failed["error"], failed["step_count"]) == (
        "failed",
        "insufficient_balance",
        0,
    )
    assert fake_openai.requests() == []
    assert await charges_of_run(hosted_openai.context.engine, run["id"]) == []
    # The free demo model still runs on an empty balance.
    demo = await hosted_openai.new_run()
    await hosted_openai.work()
    assert (await hosted_openai.get_run(demo["id"]))["status"] == "requires_action"


# --- discounts ------------------------------------------------------------------------------


@pytest.fixture
async def discounted(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer
) -> AsyncIterator[HostedHarness]:
    settings = settings_factory(
        workers=0,
        provider_env=openai_env(fake_openai),
        tier_discounts={"corporate": Decimal(10)},
        volume_discounts=[{"monthly_spend_rupiah": 100, "percent": 5}],
    )
    clock = ManualClock()
    app = create_app(settings, clock=clock)
    async for client in start_client(app):
        harness = HostedHarness(app, client, clock)
        await harness.sign_in("big", tier="corporate", balance=10_000)
        yield harness


USAGE = {"input_tokens": 20_000, "output_tokens": 5_000}  # 49.5 + 49.5 = Rp99 list price


async def test_tier_and_volume_discounts_apply_by_themselves(discounted: HostedHarness) -> None:
    meter, account = discounted.context.meter, discounted.account_id
    costs = [await meter.charge(account, OPENAI_MODEL, USAGE, "chat") for _ in range(3)]
    # Rp99 list: 10 % off for the tier; once Rp100 of list spend is behind, 5 % more.
    assert costs == [Decimal("89.1"), Decimal("89.1"), Decimal("84.645")]
    discounted.clock.advance(40 * 86_400)  # a new month starts from zero spend
    assert await meter.charge(account, OPENAI_MODEL, USAGE, "chat") == Decimal("89.1")

    async with discounted.context.engine.connect() as connection:
        rows = (await connection.execute(select(usage_charges))).all()
    assert {row.list_cost_rupiah for row in rows} == {Decimal(99)}
    balance = await balance_of(discounted.context.engine, account)
    assert balance == 10_000 - sum(costs) - Decimal("89.1")


async def test_a_paid_tier_without_discount_pays_list_price(
    discounted: HostedHarness,
) -> None:
    await discounted.context.accounts.create_account("small", "paid", Decimal(500))
    small = await account_named(discounted.context.engine, "small")
    assert small is not None
    cost = await discounted.context.meter.charge(small.id, OPENAI_MODEL, USAGE, "chat")
    assert cost == Decimal(99)


# --- exact money ----------------------------------------------------------------------------


async def test_balances_keep_every_micro_rupiah(hosted: HostedHarness) -> None:
    admin = hosted.context.accounts
    await admin.create_account("exact", "paid", Decimal("123456789012.000001"))
    for _ in range(10):
        await admin.top_up("exact", Decimal("0.1"))
    account = await account_named(hosted.context.engine, "exact")
    assert account is not None
    assert account.balance_rupiah == Decimal("123456789013.000001")
    # Binary floats would have lost the last digit long before this.
    assert float(account.balance_rupiah) != account.balance_rupiah
