"""A streamed model call's guard against a provider that goes silent (`juru.models.streams`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from langchain_core.messages import AIMessageChunk

from juru.models.streams import ModelSilentError, joined, until_silent


async def chunks_then_silence(count: int, silence: asyncio.Event) -> AsyncIterator[int]:
    for chunk in range(count):
        yield chunk
    await silence.wait()  # a provider that keeps the connection open and sends nothing


async def test_chunks_pass_through_in_order_to_the_end() -> None:
    async def three() -> AsyncIterator[int]:
        for chunk in (1, 2, 3):
            yield chunk

    assert [chunk async for chunk in until_silent(three(), 5.0)] == [1, 2, 3]


async def test_a_source_silent_for_the_limit_fails_with_the_silence_named() -> None:
    received = []
    with pytest.raises(ModelSilentError, match=r"no content for 0\.05 s \(after 2 chunks\)"):
        async for chunk in until_silent(chunks_then_silence(2, asyncio.Event()), 0.05):
            received.append(chunk)
    assert received == [0, 1]


async def test_the_timer_stops_while_the_caller_handles_a_chunk() -> None:
    async def slow_to_start() -> AsyncIterator[int]:
        yield 1
        yield 2

    received = []
    async for chunk in until_silent(slow_to_start(), 0.05):
        await asyncio.sleep(0.2)  # the caller's own work: four limits long
        received.append(chunk)
    assert received == [1, 2]


async def test_a_timeout_of_the_source_itself_is_not_taken_for_silence() -> None:
    async def times_out() -> AsyncIterator[int]:
        yield 1
        raise TimeoutError("the connection's read timed out")

    with pytest.raises(TimeoutError, match="read timed out") as raised:
        async for _ in until_silent(times_out(), 5.0):
            pass
    assert not isinstance(raised.value, ModelSilentError)


def test_joined_chunks_equal_the_chunks_added_one_by_one() -> None:
    call = {"name": "lookup", "args": '{"word": ', "id": "call_1", "index": 0}
    chunks = [
        AIMessageChunk(content="", id="m"),
        AIMessageChunk(content="Juru ", id="m"),
        AIMessageChunk(content="means expert", id="m", tool_call_chunks=[call]),
        AIMessageChunk(
            content="",
            id="m",
            tool_call_chunks=[{"name": None, "args": '"juru"}', "id": None, "index": 0}],
        ),
        AIMessageChunk(
            content="",
            id="m",
            usage_metadata={"input_tokens": 7, "output_tokens": 5, "total_tokens": 12},
            response_metadata={"finish_reason": "tool_calls"},
        ),
    ]
    one_by_one = chunks[0]
    for chunk in chunks[1:]:
        one_by_one = one_by_one + chunk

    whole = joined(chunks)

    assert whole == one_by_one
    assert whole is not None and whole.content == "Juru means expert"
    assert whole.tool_calls == [
        {"name": "lookup", "args": {"word": "juru"}, "id": "call_1", "type": "tool_call"}
    ]
    assert joined(chunks[:1]) is chunks[0]
    assert joined([]) is None


async def test_a_cancelled_call_is_cancelled_not_silent() -> None:
    awaiting = asyncio.Event()

    async def first_then_waits() -> AsyncIterator[int]:
        yield 1
        awaiting.set()
        await asyncio.Event().wait()

    async def read() -> list[int]:
        return [chunk async for chunk in until_silent(first_then_waits(), 60.0)]

    reading = asyncio.create_task(read())
    await awaiting.wait()
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
