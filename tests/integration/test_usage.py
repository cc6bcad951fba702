"""Metering: one ledger row per model call, the run's running total, and the usage summary."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from juru.core.money import PriceRules
from juru.store.accounts import balance_of
from juru.store.runs import claim_runs
from juru.store.steps import StepWrite, record_step
from juru.store.usage import ChargeRequest, charges_of_run
from tests.integration.test_run_engine import OPENAI_MODEL, WEATHER_CALL
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import HostedHarness
from tests.support.statements import statements_compiled_each_time, statements_sent

# gpt-4o-mini in the built-in catalog: Rupiah per million tokens.
MINI_INPUT, MINI_OUTPUT = Decimal(2475), Decimal(9900)


def mini_price(input_tokens: int, output_tokens: int) -> Decimal:
    """What a gpt-4o-mini call costs at list price, worked out here rather than by the code."""
    return (MINI_INPUT * input_tokens + MINI_OUTPUT * output_tokens) / 1_000_000


async def finished_weather_run(hosted: HostedHarness, **agent: Any) -> dict[str, Any]:
    run = await hosted.new_run(**agent)
    await hosted.work()
    await hosted.answer(await hosted.get_run(run["id"]))
    await hosted.work()
    return await hosted.get_run(run["id"])


async def test_each_model_call_is_one_charge_and_the_run_total_is_their_sum(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([WEATHER_CALL, {"content": "Sunny in Jakarta."}])
    run = await finished_weather_run(hosted_openai, model_id=OPENAI_MODEL)
    assert run["status"] == "succeeded"
    charges = await charges_of_run(hosted_openai.context.engine, run["id"])
    assert [(c["step"], c["source"], c["model_id"]) for c in charges] == [
        (1, "agent", OPENAI_MODEL),
        (2, "agent", OPENAI_MODEL),
    ]
    for charge in charges:
        assert charge["input_tokens"] > 0 and charge["output_tokens"] > 0
        expected = mini_price(charge["input_tokens"], charge["output_tokens"])
        assert charge["cost_rupiah"] == expected
    total = sum((c["cost_rupiah"] for c in charges), Decimal(0))
    assert total > 0 and Decimal(str(run["cost_rupiah"])) == total


async def test_a_failed_run_keeps_the_charges_of_the_calls_it_made(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([{**WEATHER_CALL, "repeat": True}])
    run = await hosted_openai.new_run(model_id=OPENAI_MODEL)
    for _ in range(2):
        await hosted_openai.work()
        await hosted_openai.answer(await hosted_openai.get_run(run["id"]))
    await hosted_openai.work()
    failed = await hosted_openai.get_run(run["id"])
    assert failed["error"] == "loop"
    charges = await charges_of_run(hosted_openai.context.engine, run["id"])
    assert [c["step"] for c in charges] == [1, 2, 3]
    assert Decimal(str(failed["cost_rupiah"])) == sum(c["cost_rupiah"] for c in charges)


async def test_the_demo_model_is_metered_and_free(hosted: HostedHarness) -> None:
    run = await finished_weather_run(hosted)
    charges = await charges_of_run(hosted.context.engine, run["id"])
    assert len(charges) == 2 and all(c["input_tokens"] > 0 for c in charges)
    assert all(c["cost_rupiah"] == 0 for c in charges) and run["cost_rupiah"] == 0


async def test_usage_sums_by_day_source_and_model(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([WEATHER_CALL, {"content": "a"}, WEATHER_CALL, {"content": "b"}])
    first = await finished_weather_run(hosted_openai, model_id=OPENAI_MODEL)
    hosted_openai.clock.advance(86_400)
    second = await finished_weather_run(hosted_openai, model_id=OPENAI_MODEL)
    demo = await finished_weather_run(hosted_openai)
    usage = (await hosted_openai.client.get("/v1/usage")).json()
    lines = [(line["day"], line["model_id"], line["calls"]) for line in usage["data"]]
    assert lines == [
        ("2026-01-01", OPENAI_MODEL, 2),
        ("2026-01-02", "juru/demo", 2),
        ("2026-01-02", OPENAI_MODEL, 2),
    ]
    assert {line["source"] for line in usage["data"]} == {"agent"}
    paid = Decimal(str(first["cost_rupiah"])) + Decimal(str(second["cost_rupiah"]))
    assert Decimal(str(usage["total_rupiah"])) == paid
    assert demo["cost_rupiah"] == 0
    one_day = (await hosted_openai.client.get("/v1/usage?from=2026-01-02&to=2026-01-02")).json()
    assert [line["day"] for line in one_day["data"]] == ["2026-01-02", "2026-01-02"]
    backwards = await hosted_openai.client.get("/v1/usage?from=2026-01-02&to=2026-01-01")
    assert backwards.status_code == 400


async def test_models_lists_the_catalog_with_prices(hosted: HostedHarness) -> None:
    models = {m["id"]: m for m in (await hosted.client.get("/v1/models")).json()["data"]}
    assert (
        models["juru/demo"]["agents"] is True
        and models["juru/demo"]["input_rupiah_per_million"] == 0
    )
    assert models["openai/gpt-5.6"]["agents"] is False
    assert models[OPENAI_MODEL]["input_rupiah_per_million"] == 2475
    assert models[OPENAI_MODEL]["output_rupiah_per_million"] == 9900


async def test_a_step_written_twice_charges_its_model_call_once(hosted: HostedHarness) -> None:
    # A step redone after a crash whose COMMIT went through writes the same call's charge
    # again (the same `charge_key`): the ledger, the run's total and the balance take it once.
    run = await hosted.new_run()
    engine = hosted.context.engine
    now = hosted.context.machine.clock.now()
    [claimed] = await claim_runs(engine, "the-worker", now, lease_seconds=60)
    assert claimed.id == run["id"]
    before = await balance_of(engine, hosted.account_id)
    call = ChargeRequest(
        account_id=hosted.account_id,
        source="agent",
        model_id=OPENAI_MODEL,
        input_tokens=1000,
        output_tokens=100,
        list_cost=mini_price(1000, 100),
        created_at=now,
        run_id=run["id"],
        step=1,
        charge_key=f"{run['id']}:step:1",
    )
    step = StepWrite(
        run_id=run["id"],
        thread_id=run["thread_id"],
        worker="the-worker",
        now=now,
        tier="free",
        step_count=1,
        charges=[call],
    )
    written = []
    with (
        statements_sent(lambda statement: "usage_charges" in statement) as writing,
        statements_compiled_each_time() as compiled,
    ):
        for _ in range(2):
            written.append(await record_step(engine, step, PriceRules()))
    assert compiled == []  # every statement of the step's write is compiled once
    assert written == [True, True]
    cost = mini_price(1000, 100)
    charges = await charges_of_run(engine, run["id"])
    assert [(c["step"], c["cost_rupiah"]) for c in charges] == [(1, cost)]
    assert Decimal(str((await hosted.get_run(run["id"]))["cost_rupiah"])) == cost
    assert await balance_of(engine, hosted.account_id) == before - cost
    # PostgreSQL writes the ledger row in the run's UPDATE; SQLite in a statement of its own.
    first = writing[0].lstrip()
    if engine.dialect_name == "postgresql":
        assert first.startswith("WITH") and "UPDATE runs" in first
    else:
        assert first.startswith("INSERT INTO usage_charges")
    assert len(writing) == 2
