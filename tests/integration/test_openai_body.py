"""The catalog's OpenAI chat models send the body the SDK would send, without its second pass,
and a completion's first attempt (whole or streamed) without the SDK's request path."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import message_chunk_to_message
from langchain_openai import ChatOpenAI

from juru.models.catalog import ModelCatalog
from juru.models.openai_body import DirectPosts, PlainBodyCompletions, with_plain_bodies
from tests.conftest import openai_env
from tests.support.fake_openai import FakeOpenAIServer

LOOKUP_TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up.",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string"}, "limit": {"type": "integer"}},
            "required": ["word"],
        },
    },
}
CONVERSATION = [
    SystemMessage("You answer with one word."),
    HumanMessage([{"type": "text", "text": "What is a juru?"}]),
    AIMessage(
        "",
        tool_calls=[{"id": "call_1", "name": "lookup", "args": {"word": "juru", "limit": 2}}],
    ),
    ToolMessage("an expert; one who does a craft", tool_call_id="call_1"),
]


@pytest.fixture
async def http_client() -> AsyncIterator[openai.DefaultAsyncHttpxClient]:
    """A connection pool of this test's own (LangChain's default one outlives event loops)."""
    async with openai.DefaultAsyncHttpxClient() as client:
        yield client


@pytest.fixture
async def posts() -> AsyncIterator[DirectPosts]:
    pool = DirectPosts()
    yield pool
    await pool.aclose()


@pytest.fixture
def sdk_posts(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The bodies `PlainBodyCompletions` hands to the SDK's request path, as it goes on."""
    handed: list[dict[str, Any]] = []
    sdk_post = PlainBodyCompletions._sdk_post

    async def counted(
        self: PlainBodyCompletions, body: dict[str, Any], *args: Any, **kw: Any
    ) -> Any:
        handed.append(body)
        return await sdk_post(self, body, *args, **kw)

    monkeypatch.setattr(PlainBodyCompletions, "_sdk_post", counted)
    return handed


def _sdk_chat_model(
    server: FakeOpenAIServer, http_client: openai.DefaultAsyncHttpxClient, **options: Any
) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini",
        api_key="test-key",
        base_url=server.base_url,
        stream_usage=True,
        http_async_client=http_client,
        **options,
    )


async def _bodies_sent(
    server: FakeOpenAIServer, model: Any, *, stream: bool
) -> list[dict[str, Any]]:
    server.reset()
    server.script([{"content": "expert"}, {"tool_calls": [{"name": "lookup", "arguments": {}}]}])
    bound = model.bind_tools([LOOKUP_TOOL], tool_choice="auto")
    for _ in range(2):
        if stream:
            async for _chunk in bound.astream(CONVERSATION):
                pass
        else:
            await bound.ainvoke(CONVERSATION)
    return server.requests()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_the_catalogs_model_sends_what_the_sdk_would_send(
    fake_openai: FakeOpenAIServer, http_client: openai.DefaultAsyncHttpxClient, stream: bool
) -> None:
    catalog = ModelCatalog.load()
    try:
        juru_model = catalog.chat_model("openai/gpt-4o-mini", openai_env(fake_openai))
        assert isinstance(juru_model, ChatOpenAI)
        assert isinstance(juru_model.async_client, PlainBodyCompletions)

        sent = await _bodies_sent(fake_openai, juru_model, stream=stream)
        expected = await _bodies_sent(
            fake_openai, _sdk_chat_model(fake_openai, http_client), stream=stream
        )
    finally:
        await catalog.aclose()

    assert len(sent) == 2
    assert sent == expected
    assert sent[0]["tools"] == [LOOKUP_TOOL]
    assert sent[0]["stream"] is stream


async def test_request_options_stay_out_of_the_body(
    fake_openai: FakeOpenAIServer, http_client: openai.DefaultAsyncHttpxClient
) -> None:
    extra = {"extra_body": {"reasoning": {"effort": "low"}}, "max_retries": 0}
    juru_model = with_plain_bodies(_sdk_chat_model(fake_openai, http_client, **extra))

    sent = await _bodies_sent(fake_openai, juru_model, stream=True)
    expected = await _bodies_sent(
        fake_openai, _sdk_chat_model(fake_openai, http_client, **extra), stream=True
    )

    assert sent == expected
    assert sent[0]["reasoning"] == {"effort": "low"}
    assert "extra_body" not in sent[0]


@pytest.mark.parametrize("direct", [False, True], ids=["sdk-path", "direct"])
async def test_provider_errors_keep_the_sdks_types(
    fake_openai: FakeOpenAIServer,
    http_client: openai.DefaultAsyncHttpxClient,
    posts: DirectPosts,
    direct: bool,
) -> None:
    chat_model = _sdk_chat_model(fake_openai, http_client, max_retries=0)
    juru_model = with_plain_bodies(chat_model, posts if direct else None)
    fake_openai.script([{"error": {"status": 429, "message": "slow down"}}])

    with pytest.raises(openai.RateLimitError, match="slow down") as caught:
        await juru_model.ainvoke("hello")

    assert caught.value.status_code == 429
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["message"] == "slow down"
    assert len(fake_openai.requests()) == 1


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_completion_goes_out_without_the_sdks_request_path(
    fake_openai: FakeOpenAIServer,
    http_client: openai.DefaultAsyncHttpxClient,
    posts: DirectPosts,
    sdk_posts: list[dict[str, Any]],
    stream: bool,
) -> None:
    juru_model = with_plain_bodies(_sdk_chat_model(fake_openai, http_client), posts)

    sent = await _bodies_sent(fake_openai, juru_model, stream=stream)

    assert len(sent) == 2 and sent[0]["tools"] == [LOOKUP_TOOL]
    assert sent[0]["stream"] is stream
    assert sdk_posts == []
    assert isinstance(posts.session(), ClientSession)


async def test_a_direct_reply_carries_the_providers_headers(
    fake_openai: FakeOpenAIServer,
    http_client: openai.DefaultAsyncHttpxClient,
    posts: DirectPosts,
    sdk_posts: list[dict[str, Any]],
) -> None:
    chat_model = _sdk_chat_model(fake_openai, http_client, include_response_headers=True)
    juru_model = with_plain_bodies(chat_model, posts)
    sdk_model = _sdk_chat_model(fake_openai, http_client, include_response_headers=True)
    fake_openai.script([{"content": "expert"}, {"content": "expert"}])

    reply = await juru_model.ainvoke("hello")
    sdk_reply = await sdk_model.ainvoke("hello")

    assert reply.content == sdk_reply.content == "expert"
    headers = reply.response_metadata["headers"]
    assert headers["content-type"] == "application/json"
    assert headers.keys() == sdk_reply.response_metadata["headers"].keys()
    assert sdk_posts == []


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_a_call_the_sdk_retries_goes_on_through_the_sdk(
    fake_openai: FakeOpenAIServer,
    http_client: openai.DefaultAsyncHttpxClient,
    posts: DirectPosts,
    sdk_posts: list[dict[str, Any]],
    stream: bool,
) -> None:
    chat_model = _sdk_chat_model(fake_openai, http_client, max_retries=2, streaming=stream)
    juru_model = with_plain_bodies(chat_model, posts)
    busy = {"status": 503, "message": "busy", "headers": {"retry-after-ms": "1"}}
    fake_openai.script([{"error": busy}, {"error": busy}, {"content": "at last"}])

    reply = await juru_model.ainvoke("hello")

    assert reply.content == "at last"
    sent = fake_openai.requests()
    assert len(sent) == 3  # the direct attempt, then the SDK's two retries
    assert sent[0] == sent[1] == sent[2]
    assert sdk_posts == [sent[0]]

    fake_openai.script([{"error": busy}] * 3)
    with pytest.raises(openai.InternalServerError, match="busy"):
        await juru_model.ainvoke("hello")
    assert len(fake_openai.requests()) == 6  # three attempts, as the SDK alone would make


async def test_a_refusal_the_sdk_does_not_retry_is_sent_once(
    fake_openai: FakeOpenAIServer,
    http_client: openai.DefaultAsyncHttpxClient,
    posts: DirectPosts,
    sdk_posts: list[dict[str, Any]],
) -> None:
    juru_model = with_plain_bodies(_sdk_chat_model(fake_openai, http_client), posts)
    fake_openai.script([{"error": {"status": 400, "message": "no such model"}}])

    with pytest.raises(openai.BadRequestError, match="no such model"):
        await juru_model.ainvoke("hello")

    assert len(fake_openai.requests()) == 1
    assert sdk_posts == []


@pytest.mark.parametrize("direct", [False, True], ids=["sdk-path", "direct"])
async def test_an_unreachable_provider_is_the_sdks_connection_error(
    unused_tcp_port: int,
    http_client: openai.DefaultAsyncHttpxClient,
    posts: DirectPosts,
    direct: bool,
) -> None:
    chat_model = ChatOpenAI(
        model="gpt-4o-mini",
        api_key="test-key",
        base_url=f"http://127.0.0.1:{unused_tcp_port}/v1",
        http_async_client=http_client,
        max_retries=0,
    )
    juru_model = with_plain_bodies(chat_model, posts if direct else None)

    with pytest.raises(openai.APIConnectionError) as caught:
        await juru_model.ainvoke("hello")

    assert str(unused_tcp_port) in str(caught.value.request.url)


async def _replies(server: FakeOpenAIServer, model: Any) -> list[AIMessage]:
    server.reset()
    call = {"id": "call_1", "name": "lookup", "arguments": {"word": "juru"}}
    server.script([{"content": "expert"}, {"tool_calls": [call]}])
    bound = model.bind_tools([LOOKUP_TOOL], tool_choice="auto")
    return [await bound.ainvoke(CONVERSATION) for _ in range(2)]


async def test_a_whole_reply_reads_as_the_sdks_would(
    fake_openai: FakeOpenAIServer, http_client: openai.DefaultAsyncHttpxClient
) -> None:
    """The reply's JSON goes to LangChain as it came, not through the SDK's response model:
    the message LangChain makes of it is the same, but for what the model adds that the
    provider did not send (an empty `refusal`, usage details of None)."""
    juru_model = with_plain_bodies(_sdk_chat_model(fake_openai, http_client))

    replies = await _replies(fake_openai, juru_model)
    expected = await _replies(fake_openai, _sdk_chat_model(fake_openai, http_client))

    assert replies[0].content == "expert"
    assert replies[1].tool_calls[0]["name"] == "lookup"
    for reply, sdk_reply in zip(replies, expected, strict=True):
        assert reply.usage_metadata is not None
        assert sdk_reply.additional_kwargs.pop("refusal") is None
        usage = reply.response_metadata.pop("token_usage")
        assert usage == _without_nones(sdk_reply.response_metadata.pop("token_usage"))
        for message in (reply, sdk_reply):  # each completion has an id of its own
            assert message.response_metadata.pop("id").startswith("chatcmpl-")
        assert reply.model_dump(exclude={"id"}) == sdk_reply.model_dump(exclude={"id"})


def _without_nones(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nones(item) for key, item in value.items() if item is not None}
    return value


async def _streamed_replies(server: FakeOpenAIServer, model: Any) -> list[AIMessage]:
    server.reset()
    call = {"id": "call_1", "name": "lookup", "arguments": {"word": "juru"}}
    server.script([{"content": "an expert in a craft"}, {"tool_calls": [call]}])
    bound = model.bind_tools([LOOKUP_TOOL], tool_choice="auto")
    replies = []
    for _ in range(2):
        whole: Any = None
        async for chunk in bound.astream(CONVERSATION):
            whole = chunk if whole is None else whole + chunk
        replies.append(message_chunk_to_message(whole))
    return replies


@pytest.mark.parametrize("direct", [False, True], ids=["sdk-path", "direct"])
async def test_a_streamed_reply_reads_as_the_sdks_would(
    fake_openai: FakeOpenAIServer,
    http_client: openai.DefaultAsyncHttpxClient,
    posts: DirectPosts,
    direct: bool,
) -> None:
    """Each streamed chunk's JSON goes to LangChain as it came, not through the SDK's chunk
    model: the joined message is the same (text, tool calls, usage)."""
    juru_model = with_plain_bodies(
        _sdk_chat_model(fake_openai, http_client), posts if direct else None
    )

    replies = await _streamed_replies(fake_openai, juru_model)
    expected = await _streamed_replies(fake_openai, _sdk_chat_model(fake_openai, http_client))

    assert replies[0].content == "an expert in a craft"
    assert replies[1].tool_calls[0]["args"] == {"word": "juru"}
    for reply, sdk_reply in zip(replies, expected, strict=True):
        assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] > 0
        assert reply.model_dump(exclude={"id"}) == sdk_reply.model_dump(exclude={"id"})


@pytest.mark.parametrize("direct", [False, True], ids=["sdk-path", "direct"])
async def test_a_provider_slower_than_the_timeout_is_the_sdks_timeout_error(
    fake_openai: FakeOpenAIServer,
    http_client: openai.DefaultAsyncHttpxClient,
    posts: DirectPosts,
    direct: bool,
) -> None:
    chat_model = _sdk_chat_model(fake_openai, http_client, timeout=0.05, max_retries=0)
    juru_model = with_plain_bodies(chat_model, posts if direct else None)
    fake_openai.script([{"content": "too late"}], latency=1)

    with pytest.raises(openai.APITimeoutError):
        await juru_model.ainvoke("hello")


async def _erring_stream(request: web.Request) -> web.StreamResponse:
    """A provider that streams one chunk, then an error in a chunk of its own."""
    answer = web.StreamResponse(headers={"content-type": "text/event-stream"})
    await answer.prepare(request)
    first = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    first["choices"] = [{"index": 0, "delta": {"content": "par"}, "finish_reason": None}]
    await answer.write(f"data: {json.dumps(first)}\n\n".encode())
    await answer.write(b'data: {"error": {"message": "the model fell over"}}\n\n')
    return answer


@pytest.mark.parametrize("direct", [False, True], ids=["sdk-path", "direct"])
async def test_an_error_in_a_streamed_chunk_is_the_sdks_error(
    http_client: openai.DefaultAsyncHttpxClient, posts: DirectPosts, direct: bool
) -> None:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", _erring_stream)
    async with TestServer(app, host="127.0.0.1") as server:
        chat_model = ChatOpenAI(
            model="gpt-4o-mini",
            api_key="test-key",
            base_url=str(server.make_url("/v1")),
            http_async_client=http_client,
            max_retries=0,
        )
        juru_model = with_plain_bodies(chat_model, posts if direct else None)
        texts = []
        with pytest.raises(openai.APIError, match="the model fell over") as caught:
            async for chunk in juru_model.astream("hello"):
                texts.append(chunk.content)

    assert texts == ["par"]
    assert caught.value.body == {"message": "the model fell over"}
