"""The fake OpenAI server, driven by the real ``openai`` and ``langchain_openai`` clients."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import openai
import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.messages.ai import add_ai_message_chunks
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageFunctionToolCallParam,
)

from tests.support.fake_openai import FakeModelState, FakeOpenAIServer, split_words

REPO_ROOT = Path(__file__).resolve().parents[2]
WEATHER_CALL = {"name": "get_weather", "arguments": {"city": "Jakarta"}}


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"Sunny and 31 degrees in {city}."


@pytest.fixture(scope="module")
def running_fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def fake(running_fake: FakeOpenAIServer) -> FakeOpenAIServer:
    """The module's fake server, with an empty script and no recorded requests."""
    running_fake.reset()
    return running_fake


@pytest.fixture
def openai_client(fake: FakeOpenAIServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=0) as client:
        yield client


def ask(client: openai.OpenAI, text: str = "Hello there") -> ChatCompletion:
    """One non-streamed completion for a single user message."""
    return client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": text}]
    )


def function_calls(message: ChatCompletionMessage) -> list[tuple[str, Any]]:
    """``(name, parsed arguments)`` of each tool call, which must all be function calls."""
    calls = message.tool_calls or []
    assert all(isinstance(call, ChatCompletionMessageFunctionToolCall) for call in calls)
    function_tool_calls = cast(list[ChatCompletionMessageFunctionToolCall], calls)
    return [(c.function.name, json.loads(c.function.arguments)) for c in function_tool_calls]


def chat_model(fake: FakeOpenAIServer, **kwargs: Any) -> ChatOpenAI:
    """A LangChain chat model pointed at the fake server."""
    return ChatOpenAI(
        base_url=fake.base_url, api_key="test", model="gpt-4o-mini", max_retries=0, **kwargs
    )


# --------------------------------------------------------------------------- openai client


def test_plain_completion_reports_usage(
    openai_client: openai.OpenAI, fake: FakeOpenAIServer
) -> None:
    fake.script([{"content": "hi"}])

    completion = ask(openai_client, "Hello there")

    assert completion.object == "chat.completion"
    assert completion.model == "gpt-4o-mini"
    choice = completion.choices[0]
    assert (choice.message.role, choice.message.content) == ("assistant", "hi")
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    # "Hello there" is 11 characters: 11 // 4 + 1 = 3; "hi": 2 // 4 + 1 = 1.
    assert completion.usage is not None
    usage = completion.usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (3, 1, 4)


def test_empty_script_answers_with_the_last_user_message(openai_client: openai.OpenAI) -> None:
    completion = ask(openai_client, "ping")

    assert completion.choices[0].message.content == "fake answer: ping"


def test_scripted_tool_calls_have_json_arguments(
    openai_client: openai.OpenAI, fake: FakeOpenAIServer
) -> None:
    second_call = {"name": "get_time", "arguments": {"zone": "Asia/Jakarta"}}
    fake.script([{"tool_calls": [WEATHER_CALL, second_call]}])

    completion = ask(openai_client, "Weather and time in Jakarta?")

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    assert function_calls(choice.message) == [
        ("get_weather", {"city": "Jakarta"}),
        ("get_time", {"zone": "Asia/Jakarta"}),
    ]
    calls = choice.message.tool_calls
    assert calls is not None
    assert all(call.type == "function" and call.id.startswith("call_") for call in calls)
    assert calls[0].id != calls[1].id


def test_stream_arrives_in_several_chunks_with_usage_last(
    openai_client: openai.OpenAI, fake: FakeOpenAIServer
) -> None:
    fake.script([{"content": "The weather in Jakarta is sunny."}])

    stream = openai_client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "user", "content": "Weather?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)

    pieces = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert len(pieces) > 1
    assert "".join(pieces) == "The weather in Jakarta is sunny."
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == len("The weather in Jakarta is sunny.") // 4 + 1
    assert all(chunk.usage is None for chunk in chunks[:-1])


def test_streamed_tool_call_arguments_reassemble(
    openai_client: openai.OpenAI, fake: FakeOpenAIServer
) -> None:
    fake.script([{"tool_calls": [WEATHER_CALL]}])

    stream = openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Weather?"}], stream=True
    )
    deltas = [call for chunk in stream for call in chunk.choices[0].delta.tool_calls or []]

    assert deltas[0].id is not None and deltas[0].id.startswith("call_")
    assert deltas[0].function is not None and deltas[0].function.name == "get_weather"
    arguments = "".join(d.function.arguments or "" for d in deltas if d.function is not None)
    assert len(deltas) > 2
    assert json.loads(arguments) == {"city": "Jakarta"}


def test_chunk_delay_spaces_out_the_stream(
    openai_client: openai.OpenAI, fake: FakeOpenAIServer
) -> None:
    fake.script([{"content": "one two three", "chunk_delay": 0.05}])

    started = time.monotonic()
    stream = openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Count"}], stream=True
    )
    chunks = list(stream)

    # role, three words, finish: five chunks, so four pauses.
    assert len(chunks) == 5
    assert time.monotonic() - started >= 4 * 0.05


def test_hold_stops_the_stream_after_its_first_piece_until_the_gate_opens(
    openai_client: openai.OpenAI, fake: FakeOpenAIServer
) -> None:
    fake.script([{"content": "one two three", "hold": "rest"}])
    stream = openai_client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "Count"}], stream=True
    )
    chunks = iter(stream)
    pieces = [next(chunks).choices[0].delta.content, next(chunks).choices[0].delta.content]

    assert pieces == ["", "one "]
    assert fake.is_held("rest")
    fake.open_gate("rest")
    rest = [chunk.choices[0].delta.content for chunk in chunks]
    assert rest[:2] == ["two ", "three"]
    assert not fake.is_held("rest")


def test_reset_opens_every_gate(fake: FakeOpenAIServer) -> None:
    fake.open_gate("other")
    fake.reset()
    assert not fake.is_held("other")
    with pytest.raises(ValueError, match="hold"):
        fake.script([{"content": "x", "hold": 3}])


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        (400, openai.BadRequestError),
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
def test_scripted_error_surfaces_as_client_exception(
    openai_client: openai.OpenAI,
    fake: FakeOpenAIServer,
    status: int,
    error_class: type[openai.APIStatusError],
) -> None:
    fake.script([{"error": {"status": status, "message": "scripted failure"}}])

    with pytest.raises(error_class) as caught:
        ask(openai_client)

    assert caught.value.status_code == status
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["message"] == "scripted failure"
    assert ask(openai_client, "again").choices[0].message.content == "fake answer: again"


def test_missing_api_key_gets_401(openai_client: openai.OpenAI, fake: FakeOpenAIServer) -> None:
    with pytest.raises(openai.AuthenticationError) as caught:
        openai_client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[{"role": "user", "content": "Hi"}],
            extra_headers={"Authorization": openai.omit},
        )
    assert caught.value.status_code == 401

    response = httpx.post(f"{fake.base_url}/chat/completions", json={"model": "m"})
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "invalid_api_key"
    assert {"message", "type", "code"} <= error.keys()
    assert fake.requests() == []


def test_repeat_reply_is_never_consumed(
    openai_client: openai.OpenAI, fake: FakeOpenAIServer
) -> None:
    fake.script([{"content": "once"}, {"tool_calls": [WEATHER_CALL], "repeat": True}])

    first = ask(openai_client).choices[0].message
    later = [ask(openai_client).choices[0].message for _ in range(3)]

    assert first.content == "once"
    assert all(function_calls(m) == [("get_weather", {"city": "Jakarta"})] for m in later)
    assert fake.state.pending_replies == 1


def test_requests_are_recorded(openai_client: openai.OpenAI, fake: FakeOpenAIServer) -> None:
    openai_client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        temperature=0.2,
        max_completion_tokens=50,
    )

    (recorded,) = fake.requests()
    assert recorded["model"] == "gpt-4o-mini"
    assert recorded["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
    ]
    assert (recorded["temperature"], recorded["max_completion_tokens"]) == (0.2, 50)


def test_latency_and_delay_hold_the_answer_back(
    openai_client: openai.OpenAI, fake: FakeOpenAIServer
) -> None:
    fake.script([{"content": "late"}], latency=0.2)
    started = time.monotonic()
    assert ask(openai_client).choices[0].message.content == "late"
    assert time.monotonic() - started >= 0.2

    fake.script([{"content": "too late", "delay": 1.0}], latency=0.0)
    with pytest.raises(openai.APITimeoutError):
        openai_client.with_options(timeout=0.1).chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "Hi"}]
        )


def test_history_with_unanswered_tool_call_is_rejected(openai_client: openai.OpenAI) -> None:
    tool_call: ChatCompletionMessageFunctionToolCallParam = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": "{}"},
    }
    with pytest.raises(openai.BadRequestError, match="tool_call_ids did not have response"):
        openai_client.chat.completions.create(
            model="gpt-4o-mini",
            messages=[
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": None, "tool_calls": [tool_call]},
                {"role": "user", "content": "Well?"},
            ],
        )


def test_models_are_listed(openai_client: openai.OpenAI) -> None:
    assert {model.id for model in openai_client.models.list()} >= {"gpt-4o-mini"}


# --------------------------------------------------------------------------- control API


def test_control_endpoints_script_and_inspect(
    openai_client: openai.OpenAI, fake: FakeOpenAIServer
) -> None:
    with httpx.Client(base_url=fake.url) as control:
        scripted = control.post("/_control/script", json={"replies": [{"content": "remote"}]})
        assert scripted.status_code == 200
        assert ask(openai_client, "via control").choices[0].message.content == "remote"

        recorded = control.get("/_control/requests").json()
        assert [body["messages"][-1]["content"] for body in recorded] == ["via control"]

        assert control.post("/_control/reset").status_code == 200
        assert control.get("/_control/requests").json() == []

        bad = control.post("/_control/script", json={"replies": [{"contnet": "typo"}]})
        assert bad.status_code == 400
        assert "contnet" in bad.json()["error"]["message"]


def test_unknown_reply_keys_are_rejected_early() -> None:
    with pytest.raises(ValueError, match="unknown reply keys"):
        FakeModelState([{"text": "hello"}])


def test_split_words_joins_back_exactly() -> None:
    for text in ["", "   ", "one", " two  words ", "line\nbreak\tand tab"]:
        assert "".join(split_words(text)) == text


# --------------------------------------------------------------------------- LangChain


def test_langchain_tool_call_round_trip(fake: FakeOpenAIServer) -> None:
    fake.script([{"tool_calls": [WEATHER_CALL]}, {"content": "It is sunny in Jakarta."}])
    model = chat_model(fake).bind_tools([get_weather])
    history: list[BaseMessage] = [HumanMessage("What is the weather in Jakarta?")]

    call_message = model.invoke(history)
    assert isinstance(call_message, AIMessage)
    (call,) = call_message.tool_calls
    assert (call["name"], call["args"]) == ("get_weather", {"city": "Jakarta"})
    assert call["id"] is not None and call["id"].startswith("call_")

    history += [call_message, get_weather.invoke(call)]
    answer = model.invoke(history)

    assert answer.content == "It is sunny in Jakarta."
    assert answer.usage_metadata is not None
    usage = answer.usage_metadata
    assert usage["output_tokens"] == len("It is sunny in Jakarta.") // 4 + 1
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"] > 0
    first, second = fake.requests()
    assert first["tools"][0]["function"]["name"] == "get_weather"
    assert second["messages"][-1]["role"] == "tool"
    assert second["messages"][-1]["tool_call_id"] == call["id"]


async def test_langchain_async_stream_with_tool_call_and_usage(fake: FakeOpenAIServer) -> None:
    fake.script([{"tool_calls": [WEATHER_CALL]}])
    model = chat_model(fake, stream_usage=True).bind_tools([get_weather])

    chunks = [chunk async for chunk in model.astream("Weather in Jakarta?")]

    assert len(chunks) > 2
    assert all(isinstance(chunk, AIMessageChunk) for chunk in chunks)
    merged = add_ai_message_chunks(*cast(list[AIMessageChunk], chunks))
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [
        ("get_weather", {"city": "Jakarta"})
    ]
    assert merged.usage_metadata is not None
    assert merged.usage_metadata["output_tokens"] > 0
    assert fake.requests()[0]["stream_options"] == {"include_usage": True}


# --------------------------------------------------------------------------- process mode


@pytest.mark.e2e
def test_runs_as_a_process_and_is_scripted_over_http() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fake_openai", "--port", "0"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        word, base_url = process.stdout.readline().split()
        assert word == "LISTENING"
        root = base_url.removesuffix("/v1")
        httpx.post(f"{root}/_control/script", json={"replies": [{"content": "from a process"}]})
        with openai.OpenAI(base_url=base_url, api_key="test", max_retries=0) as remote:
            assert ask(remote).choices[0].message.content == "from a process"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
        if process.stdout is not None:
            process.stdout.close()
