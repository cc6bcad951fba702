"""`POST /v1/chat/completions` called with the official `openai` client through Juru to the
fake upstream: plain, with tools, streaming; every call lands in the ledger (source `chat`)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from sqlalchemy import select

from juru.store.accounts import balance_of
from juru.store.tables import usage_charges
from tests.integration.test_run_engine import OPENAI_MODEL
from tests.integration.test_usage import mini_price
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import WEATHER_TOOL, HostedHarness, api_error


@pytest.fixture
async def client(hosted_openai: HostedHarness) -> AsyncIterator[openai.AsyncOpenAI]:
    """The official client, talking to Juru's app (in process) with the harness's key."""
    transport = httpx.ASGITransport(app=hosted_openai.app)
    async with httpx.AsyncClient(transport=transport) as http:
        yield openai.AsyncOpenAI(
            base_url="http://juru.test/v1",
            api_key=hosted_openai.headers["Authorization"].removeprefix("Bearer "),
            http_client=http,
            max_retries=0,
        )


async def ledger(hosted: HostedHarness) -> list[Any]:
    async with hosted.context.engine.connect() as connection:
        return list(
            (await connection.execute(select(usage_charges).order_by(usage_charges.c.id))).all()
        )


async def test_a_plain_completion_is_answered_and_charged(
    client: openai.AsyncOpenAI, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([{"content": "Jakarta is the capital of Indonesia."}])
    before = await balance_of(hosted_openai.context.engine, hosted_openai.account_id)
    completion = await client.chat.completions.create(
        model=OPENAI_MODEL,
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is the capital of Indonesia?"},
        ],
        temperature=0.2,
        max_tokens=50,
    )
    assert completion.object == "chat.completion" and completion.model == OPENAI_MODEL
    choice = completion.choices[0]
    assert choice.message.content == "Jakarta is the capital of Indonesia."
    assert choice.finish_reason == "stop" and choice.message.tool_calls is None
    assert completion.usage is not None and completion.usage.prompt_tokens > 0

    upstream = fake_openai.requests()[-1]
    assert upstream["model"] == "gpt-4o-mini"
    assert upstream["temperature"] == 0.2
    assert 50 in (upstream.get("max_tokens"), upstream.get("max_completion_tokens"))
    assert [m["role"] for m in upstream["messages"]] == ["system", "user"]

    [charge] = await ledger(hosted_openai)
    assert (charge.source, charge.model_id, charge.run_id) == ("chat", OPENAI_MODEL, None)
    assert charge.input_tokens == completion.usage.prompt_tokens
    assert charge.output_tokens == completion.usage.completion_tokens
    assert charge.cost_rupiah == mini_price(charge.input_tokens, charge.output_tokens) > 0
    after = await balance_of(hosted_openai.context.engine, hosted_openai.account_id)
    assert after == before - charge.cost_rupiah


async def test_tool_calls_round_trip_through_the_client(
    client: openai.AsyncOpenAI, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Bandung"}}]},
            {"content": "Bandung: 24 C and cloudy."},
        ]
    )
    question = {"role": "user", "content": "Weather in Bandung?"}
    first = await client.chat.completions.create(
        model=OPENAI_MODEL,
        messages=[question],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        tool_choice="required",
    )
    assert first.choices[0].finish_reason == "tool_calls"
    [call] = first.choices[0].message.tool_calls or []
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Bandung"}
    sent = fake_openai.requests()[-1]
    assert sent["tool_choice"] == "required"
    assert sent["tools"][0]["function"]["name"] == "get_weather"

    second = await client.chat.completions.create(
        model=OPENAI_MODEL,
        messages=[
            question,
            first.choices[0].message.model_dump(exclude_none=True),  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 24}'},
        ],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    )
    assert second.choices[0].message.content == "Bandung: 24 C and cloudy."
    relayed = fake_openai.requests()[-1]["messages"]
    assert [m["role"] for m in relayed] == ["user", "assistant", "tool"]
    assert relayed[1]["tool_calls"][0]["id"] == call.id
    assert relayed[2]["tool_call_id"] == call.id
    assert [row.source for row in await ledger(hosted_openai)] == ["chat", "chat"]


async def test_streaming_sends_chunks_then_done_and_is_charged(
    client: openai.AsyncOpenAI, hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    answer = "Surabaya is a large port city in East Java."
    fake_openai.script([{"content": answer}])
    stream = await client.chat.completions.create(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": "Tell me about Surabaya."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == answer
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 1
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop" and set(finishes[:-1]) == {None}
    usage = chunks[-1].usage
    assert usage is not None and not chunks[-1].choices

    [charge] = await ledger(hosted_openai)
    assert charge.source == "chat"
    assert (charge.input_tokens, charge.output_tokens) == (
        usage.prompt_tokens,
        usage.completion_tokens,
    )
    assert charge.cost_rupiah == mini_price(usage.prompt_tokens, usage.completion_tokens)


async def test_streamed_tool_calls_arrive_as_deltas(
    client: openai.AsyncOpenAI, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([{"tool_calls": [{"name": "get_weather", "arguments": {"city": "Medan"}}]}])
    stream = await client.chat.completions.create(
        model=OPENAI_MODEL,
        messages=[{"role": "user", "content": "Weather in Medan?"}],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        stream=True,
    )
    chunks = [chunk async for chunk in stream]
    deltas = [d for c in chunks for d in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].id and deltas[0].function and deltas[0].function.name == "get_weather"
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function)
    assert json.loads(arguments) == {"city": "Medan"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_errors_have_the_api_shape(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    post = hosted_openai.client.post
    body = {"model": OPENAI_MODEL, "messages": [{"role": "user", "content": "hi"}]}
    api_error(
        await post("/v1/chat/completions", json={**body, "model": "acme/nope"}),
        404,
        "model_not_found",
    )
    api_error(
        await post("/v1/chat/completions", json={**body, "messages": []}), 400, "invalid_request"
    )
    api_error(
        await post("/v1/chat/completions", json={**body, "logprobs": True}), 400, "invalid_request"
    )
    api_error(
        await post("/v1/chat/completions", json={**body, "messages": [{"role": "wizard"}]}),
        400,
        "invalid_request",
    )
    fake_openai.script([{"error": {"status": 500, "message": "upstream broke"}, "repeat": True}])
    failed = await post("/v1/chat/completions", json=body)
    assert "upstream broke" in api_error(failed, 502, "upstream_error")
    streamed = await post("/v1/chat/completions", json={**body, "stream": True})
    api_error(streamed, 502, "upstream_error")
    assert await ledger(hosted_openai) == []


async def test_an_empty_balance_is_402_for_paid_models_only(
    hosted_openai: HostedHarness, fake_openai: FakeOpenAIServer
) -> None:
    hosted_openai.act_as(await hosted_openai.new_account("broke"))
    body = {"messages": [{"role": "user", "content": "What is the weather in Jakarta?"}]}
    refused = await hosted_openai.client.post(
        "/v1/chat/completions", json={**body, "model": OPENAI_MODEL}
    )
    api_error(refused, 402, "insufficient_balance")
    assert fake_openai.requests() == []
    demo = await hosted_openai.client.post(
        "/v1/chat/completions", json={**body, "model": "juru/demo"}
    )
    assert demo.status_code == 200, demo.text
    assert demo.json()["choices"][0]["message"]["content"]
    [charge] = await ledger(hosted_openai)
    assert (charge.model_id, charge.cost_rupiah) == ("juru/demo", 0)
