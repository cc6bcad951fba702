"""Money never goes below zero: before a paid call the most it can cost is held against the
balance, and the charge settles the hold. Concurrent runs and chat calls on a tiny balance,
calls in flight when their run is cancelled or its agent deleted, a streamed chat whose client
leaves, holds whose process died, and `GET /v1/account`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from decimal import Decimal
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from sqlalchemy import select

from juru.engine.worker import Worker
from juru.store import runs as run_store
from juru.store.accounts import account_named
from juru.store.holds import held_total
from juru.store.tables import balance_holds, usage_charges
from juru.store.usage import charges_of_run
from tests.integration.test_run_engine import OPENAI_MODEL, WEATHER_CALL, _until
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import WEATHER_TOOL, HostedHarness, api_error
from tests.support.statements import sends_part, statements_seen

# A reply that calls a tool the agent lacks (an error result, and the loop goes on), with
# arguments long enough that each step costs about Rp50 of output.
PADDED_CALL = {
    "tool_calls": [{"name": "lookup", "arguments": {"pad": "x" * 20_000}}],
    "repeat": True,
}


async def account_state(hosted: HostedHarness, name: str) -> tuple[Decimal, Decimal]:
    """The account's balance and held amount; checks that the held amount is the sum of its
    hold rows."""
    account = await account_named(hosted.context.engine, name)
    assert account is not None
    assert await held_total(hosted.context.engine, account.id) == account.held_rupiah
    return account.balance_rupiah, account.held_rupiah


async def _until_async(
    read: Callable[[], Awaitable[Decimal]], value: Decimal, timeout: float = 10
) -> None:
    """Read until `read` gives `value` or `timeout` seconds passed (state another task writes)."""
    async with asyncio.timeout(timeout):
        while await read() != value:
            await asyncio.sleep(0.01)


async def ledger_total(hosted: HostedHarness, run_ids: list[str]) -> Decimal:
    charges = [c for run_id in run_ids for c in await charges_of_run(hosted.context.engine, run_id)]
    return sum((Decimal(c["cost_rupiah"]) for c in charges), Decimal(0))


async def test_fifty_concurrent_runs_never_take_a_tiny_balance_below_zero(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    opening = Decimal(400)  # two holds of a gpt-4o-mini call (about Rp163 each) fit at once
    hosted.act_as(await hosted.new_account("tiny", tier="corporate", balance=opening))
    fake_openai.script([PADDED_CALL], latency=0.05)
    agent = await hosted.create_agent(model_id=OPENAI_MODEL, max_steps=40)
    runs = []
    for _ in range(50):
        thread = await hosted.create_thread(agent["id"])
        runs.append((await hosted.start_run(thread["id"])).json())
    worker = Worker(hosted.context.run_context(), concurrency=50, name="wide")
    hosted.workers.append(worker)
    while await worker.fill_slots():
        await worker.drain()

    ended = [await hosted.get_run(run["id"]) for run in runs]
    assert {(r["status"], r["error"]) for r in ended} == {("failed", "insufficient_balance")}
    balance, held = await account_state(hosted, "tiny")
    spent = await ledger_total(hosted, [run["id"] for run in runs])
    assert spent > 0 and held == 0
    assert balance == opening - spent >= 0
    # Each step cost about Rp50: without holds, 50 runs passing a balance check at once
    # would have spent far more than the balance.
    assert len(fake_openai.requests()) == sum(r["step_count"] for r in ended) < 50


async def test_a_hundred_concurrent_chat_calls_never_take_a_tiny_balance_below_zero(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    hosted.act_as(await hosted.new_account("chatty", balance=Decimal(1)))
    # About 46 output tokens (Rp0.46 each at gpt-4o-mini's price), within max_tokens 50: a
    # hold is about Rp0.5, so at most two calls are in flight and two are ever paid for.
    fake_openai.script([{"content": "y" * 180, "repeat": True}], latency=0.05)
    body = {
        "model": OPENAI_MODEL,
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 50,
    }
    responses = await asyncio.gather(
        *(hosted.client.post("/v1/chat/completions", json=body) for _ in range(100))
    )
    statuses = [r.status_code for r in responses]
    assert set(statuses) == {200, 402}
    refused = next(r for r in responses if r.status_code == 402)
    assert "may cost up to" in api_error(refused, 402, "insufficient_balance")
    served = [r.json() for r in responses if r.status_code == 200]
    cost = sum(
        (
            Decimal(2475) * s["usage"]["prompt_tokens"]
            + Decimal(9900) * s["usage"]["completion_tokens"]
        )
        / 1_000_000
        for s in served
    )
    balance, held = await account_state(hosted, "chatty")
    assert held == 0 and balance == Decimal(1) - cost >= 0
    assert len(served) == len(fake_openai.requests()) <= 2


async def test_a_call_in_flight_is_held_on_the_account_until_it_is_charged(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    fake_openai.script([{"content": "slow", "delay": 1}])
    body = {"model": OPENAI_MODEL, "messages": [{"role": "user", "content": "hi"}]}
    call = asyncio.ensure_future(hosted.client.post("/v1/chat/completions", json=body))
    await _until(lambda: len(fake_openai.requests()) == 1)
    during = (await hosted.client.get("/v1/account")).json()
    # The most the call can cost: its prompt's bytes at the input price and gpt-4o-mini's
    # output cap (16,384 tokens) at the output price.
    output_cap_price = Decimal(16_384 * 9900) / 1_000_000
    held = Decimal(str(during["held_rupiah"]))
    assert output_cap_price < held < output_cap_price + 1
    assert Decimal(str(during["available_rupiah"])) == 1_000_000 - held
    answered = await call
    assert answered.status_code == 200
    after = (await hosted.client.get("/v1/account")).json()
    usage = answered.json()["usage"]
    cost = Decimal(2475 * usage["prompt_tokens"] + 9900 * usage["completion_tokens"]) / 1_000_000
    assert after["held_rupiah"] == 0
    assert Decimal(str(after["balance_rupiah"])) == 1_000_000 - cost


async def test_the_account_shows_balance_holds_and_rate_limit(hosted: HostedHarness) -> None:
    hosted.act_as(await hosted.new_account("shown", tier="corporate", balance=Decimal("12.5")))
    account = (await hosted.client.get("/v1/account")).json()
    found = await account_named(hosted.context.engine, "shown")
    assert found is not None
    assert account == {
        "id": found.id,
        "object": "account",
        "name": "shown",
        "tier": "corporate",
        "balance_rupiah": 12.5,
        "held_rupiah": 0,
        "available_rupiah": 12.5,
        "rate_limit": {"limit": "300/minute", "requests": 300, "window_seconds": 60},
        "created_at": account["created_at"],
    }
    hosted.act_as({"Authorization": "Bearer juru_live_not_a_key"})
    assert (await hosted.client.get("/v1/account")).status_code == 401


async def test_a_streamed_chat_is_charged_in_full_when_its_client_leaves(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    chat = hosted.context.chat
    fake_openai.script([{"content": "a long answer " * 20, "hold": "left"}])
    request = {
        "model": OPENAI_MODEL,
        "messages": [{"role": "user", "content": "tell me"}],
        "stream": True,
    }
    prepared = await chat.prepare(hosted.account_id, request)
    chunks = await chat.start_stream(prepared)
    first = await anext(chunks)
    assert first["choices"][0]["delta"]["role"] == "assistant"
    await chunks.aclose()  # what the server does when the client goes away
    await _until(lambda: fake_openai.is_held("left"))
    fake_openai.open_gate("left")
    await asyncio.wait_for(asyncio.gather(*chat.calls_in_flight), timeout=20)

    query = select(usage_charges).where(usage_charges.c.source == "chat")
    rows = await hosted.context.engine.rows(query)
    assert len(rows) == 1 and rows[0]["output_tokens"] == len("a long answer " * 20) // 4 + 1
    balance, held = await account_state(hosted, "tester")
    assert held == 0 and balance == 1_000_000 - rows[0]["cost_rupiah"]


async def test_deleting_an_agent_cancels_its_run_and_charges_the_call_in_flight(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer, caplog: pytest.LogCaptureFixture
) -> None:
    hosted = hosted_openai
    fake_openai.script([{"content": "never seen", "delay": 1}])
    run = await hosted.new_run(model_id=OPENAI_MODEL)
    worker = hosted.worker()
    assert await worker.fill_slots() == 1
    await _until(lambda: len(fake_openai.requests()) == 1)
    with caplog.at_level(logging.WARNING):
        deleted = await hosted.client.delete(f"/v1/agents/{run['agent_id']}")
        assert deleted.status_code == 200
        await asyncio.wait_for(worker.drain(), timeout=20)
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert (await hosted.client.get(f"/v1/runs/{run['id']}")).status_code == 404
    charges = await charges_of_run(hosted.context.engine, run["id"])
    assert len(charges) == 1 and charges[0]["cost_rupiah"] > 0
    balance, held = await account_state(hosted, "tester")
    assert held == 0 and balance == 1_000_000 - charges[0]["cost_rupiah"]


async def test_holds_of_a_process_that_died_are_given_back_once_they_expire(
    hosted_openai: HostedHarness,
) -> None:
    hosted = hosted_openai
    meter = hosted.context.meter
    messages = [HumanMessage("What is the weather in Jakarta?")]
    most = meter.most_a_call_costs(OPENAI_MODEL, messages, [WEATHER_TOOL])
    # Held and never settled, as when the process making the call is killed.
    await meter.hold_call(hosted.account_id, OPENAI_MODEL, messages, [WEATHER_TOOL])
    assert await account_state(hosted, "tester") == (Decimal(1_000_000), most)
    hosted.clock.advance(meter.hold_seconds - 1)
    await hosted.reap()
    assert (await account_state(hosted, "tester"))[1] == most
    hosted.clock.advance(2)
    await hosted.reap()
    assert await account_state(hosted, "tester") == (Decimal(1_000_000), Decimal(0))


async def test_a_call_whose_hold_does_not_fit_is_refused_before_the_provider(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    meter = hosted.context.meter
    body: dict[str, Any] = {"model": OPENAI_MODEL, "messages": [{"role": "user", "content": "hi"}]}
    most = meter.most_a_call_costs(OPENAI_MODEL, [HumanMessage("hi")])
    hosted.act_as(await hosted.new_account("short", balance=most - Decimal("0.000001")))
    refused = await hosted.client.post("/v1/chat/completions", json=body)
    api_error(refused, 402, "insufficient_balance")
    # Asking for fewer output tokens makes the hold smaller, and the same balance enough.
    assert (
        await hosted.client.post("/v1/chat/completions", json={**body, "max_tokens": 100})
    ).status_code == 200
    assert len(fake_openai.requests()) == 1


def hold_writes() -> AbstractContextManager[list[str]]:
    """The statements that take holds while the block runs (on PostgreSQL the INSERT of a
    hold's row follows the account's UPDATE in a `WITH`; on SQLite a hold is a part of the
    joined write, `store.joined`)."""
    return statements_seen(
        lambda statement, context: (
            "INSERT INTO BALANCE_HOLDS" in statement.upper()
            or sends_part("hold", statement, context)
        )
    )


async def held_now(hosted: HostedHarness) -> Decimal:
    return Decimal(str((await hosted.client.get("/v1/account")).json()["held_rupiah"]))


async def test_a_run_holds_its_calls_with_its_creation_and_its_tool_outputs(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    # The worker takes no hold of its own: the first call's hold rides with the run's
    # creation, the second's with the tool outputs, each in the write that happens anyway.
    hosted = hosted_openai
    fake_openai.script([WEATHER_CALL, {"content": "Sunny, 32 °C."}])
    # The output cap's price, and the prompt's kilobyte or so (tool schema included).
    output_cap_price = Decimal(16_384 * 9900) / 1_000_000
    run = await hosted.new_run(model_id=OPENAI_MODEL)
    assert output_cap_price < await held_now(hosted) < output_cap_price + 3
    with hold_writes() as worker_holds:
        await hosted.work()
    paused = await hosted.get_run(run["id"])
    assert paused["status"] == "requires_action" and await held_now(hosted) == 0

    assert (await hosted.answer(paused)).status_code == 200
    assert output_cap_price < await held_now(hosted) < output_cap_price + 3
    with hold_writes() as resumed_holds:
        await hosted.work()
    done = await hosted.get_run(run["id"])
    assert done["status"] == "succeeded" and len(worker_holds) == len(resumed_holds) == 0
    balance, held = await account_state(hosted, "tester")
    assert held == 0 and balance == 1_000_000 - Decimal(str(done["cost_rupiah"]))


async def test_a_thread_with_history_holds_the_rest_before_the_call(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    fake_openai.script([{"content": "x" * 4000}, {"content": "short"}])
    agent = await hosted.create_agent(model_id=OPENAI_MODEL, tools=[])
    thread = await hosted.create_thread(agent["id"])
    first = (await hosted.start_run(thread["id"], "first")).json()
    await hosted.work()
    # The second run's creation holds as for a new thread; the 4 kB answer before it makes the
    # call larger, so the worker replaces that hold with a larger one before calling.
    second = (await hosted.start_run(thread["id"], "second")).json()
    with hold_writes() as worker_holds:
        await hosted.work()
    assert (await hosted.get_run(second["id"]))["status"] == "succeeded"
    assert len(worker_holds) == 1
    spent = await ledger_total(hosted, [first["id"], second["id"]])
    assert await account_state(hosted, "tester") == (1_000_000 - spent, Decimal(0))


async def test_cancelling_a_resumed_run_before_a_worker_takes_it_gives_its_hold_back(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    fake_openai.script([WEATHER_CALL])
    run = await hosted.new_run(model_id=OPENAI_MODEL)
    await hosted.work()
    await hosted.answer(await hosted.get_run(run["id"]))
    held_for_the_call = (await account_state(hosted, "tester"))[1]
    assert held_for_the_call > 0
    cancelled = await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    # The run was handed to the worker that paused it, in the outputs' write: the hold is that
    # worker's to give back (it could be calling the model already), which it does when it
    # finds the run ended.
    assert (await account_state(hosted, "tester"))[1] == held_for_the_call
    await hosted.work()
    balance, held = await account_state(hosted, "tester")
    assert held == 0 and balance == 1_000_000 - Decimal(str(cancelled.json()["cost_rupiah"]))
    assert len(fake_openai.requests()) == 1


async def test_a_resumed_run_another_worker_took_keeps_its_hold_until_that_worker_ends(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted = hosted_openai
    fake_openai.script([WEATHER_CALL, {"content": "late", "delay": 60}])
    run = await hosted.new_run(model_id=OPENAI_MODEL)
    await hosted.work()
    await hosted.answer(await hosted.get_run(run["id"]))
    # The hand-off lapses before the worker it was handed to takes the run up; another takes
    # it, holding the pre-hold for its call, and the run is cancelled during that call.
    hosted.clock.advance(hosted.context.machine.limits.handoff_seconds + 1)
    other = hosted.worker("other-worker")
    assert await other.fill_slots() == 1
    await _until(lambda: len(fake_openai.requests()) == 2)
    held_for_the_call = (await account_state(hosted, "tester"))[1]
    assert held_for_the_call > 0
    cancelled = await hosted.client.post(f"/v1/runs/{run['id']}/cancel")
    assert cancelled.json()["status"] == "cancelled"
    # The worker it was handed to leaves the hold to the one calling the model.
    assert hosted.default_worker is not None
    assert await hosted.default_worker.fill_slots(claim=False) == 0
    assert (await account_state(hosted, "tester"))[1] == held_for_the_call
    # Stopped, that worker gives its holds back (a write that may end after `stop`).
    await other.stop()
    account_id = hosted.account_id
    await _until_async(lambda: held_total(hosted.context.engine, account_id), Decimal(0))
    spent = await ledger_total(hosted, [run["id"]])
    assert await account_state(hosted, "tester") == (1_000_000 - spent, Decimal(0))


async def test_a_run_whose_first_hold_does_not_fit_is_created_without_one(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    # The hold's row is written before the account is touched (the account's row goes last in
    # a write); a hold that does not fit leaves neither the row nor the run's mark of it.
    hosted = hosted_openai
    hosted.act_as(await hosted.new_account("short", balance=100))
    run = await hosted.new_run(model_id=OPENAI_MODEL)
    assert run["status"] == "queued"
    assert await account_state(hosted, "short") == (Decimal(100), Decimal(0))
    stored = await run_store.get_run(hosted.context.engine, run["id"])
    assert stored is not None and stored.hold_id is None and stored.hold_rupiah is None
    holds = await hosted.context.engine.rows(select(balance_holds.c.id))
    assert holds == []
    await hosted.work()
    ended = await hosted.get_run(run["id"])
    assert ended["status"] == "failed" and "balance" in ended["error"]
    assert fake_openai.requests() == []
    assert await account_state(hosted, "short") == (Decimal(100), Decimal(0))
