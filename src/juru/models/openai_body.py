"""Chat completions sent with the body LangChain built, without the OpenAI SDK's second pass.

`ChatOpenAI` builds a request body of plain JSON values and hands it to the SDK's
`chat.completions.create`, which walks the whole body again against the request's TypedDict
(`async_maybe_transform`) before posting it. For a chat completion that walk changes nothing
(none of its fields is renamed or reformatted), and it costs more than the rest of the model
client together: about 2 ms per call for a five-step run's messages, 18 ms for sixty messages,
growing with the thread. `PlainBodyCompletions` posts the body as it is.

A whole reply comes back as the JSON object it was, not as the SDK's `ChatCompletion` model,
and so does each chunk of a streamed one (not a `ChatCompletionChunk`): `ChatOpenAI` reads
them as dicts, and would otherwise dump the model it was just given back into one (building
and dumping it cost about 0.2 ms a call, and as much again for every chunk of a stream).

Given a `DirectPosts` pool, a completion's first attempt also skips the SDK's request path:
the SDK builds an `httpx` request (URL parsing, header merging, its options model) and sends
it through `httpx` onto its aiohttp transport, about 0.5 ms of CPU a call where posting the
same bytes on aiohttp and reading the JSON takes 0.2 (bench/RESULTS.md, thirty-first round).
The bytes and headers are the SDK's own (its serializer, the headers it builds for a first
attempt), and a stream is read with the SDK's SSE decoder (`DirectStream`). Anything but a 2xx
answer is handled as the SDK handles it: a refusal raises the SDK's error for its status, and
what the SDK retries (a lost connection, a timeout, 408, 409, 429, 5xx) waits the SDK's delay
and goes on through the SDK's own path with one retry fewer. Calls with request options other
than the raw-response header, and clients that sign each request (a key provider, workload
identity), take the SDK's path throughout.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
import httpx2
from openai import APIConnectionError, APIError, APITimeoutError, AsyncOpenAI, AsyncStream
from openai._base_client import make_request_options
from openai._constants import DEFAULT_CONNECTION_LIMITS, RAW_RESPONSE_HEADER
from openai._models import FinalRequestOptions, SecurityOptions
from openai._streaming import SSEDecoder
from openai._utils._json import openapi_dumps
from openai.resources.chat.completions import AsyncCompletions

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

PATH = "/chat/completions"
# The keyword arguments of `create` that are request options rather than fields of the body.
_REQUEST_OPTIONS = ("extra_headers", "extra_query", "extra_body", "timeout")
_RAW_RESPONSE = {"extra_headers": {RAW_RESPONSE_HEADER: "true"}}
_SECURITY: SecurityOptions = {"bearer_auth": True}
# Headers of httpx's own that aiohttp sets for itself (an encoding it can decode, among them).
_AIOHTTPS_OWN_HEADERS = {"accept-encoding", "connection", "host", "content-length"}


class DirectPosts:
    """The aiohttp connection pool of chat completions posted directly, opened at the first
    call (inside the event loop, as aiohttp wants) with the SDK's own limits."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=DEFAULT_CONNECTION_LIMITS.max_connections or 0,
                keepalive_timeout=DEFAULT_CONNECTION_LIMITS.keepalive_expiry or 0,
            )
            self._session = aiohttp.ClientSession(connector=connector)
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class PlainBodyCompletions(AsyncCompletions):
    """`AsyncOpenAI.chat.completions` whose `create` posts its keyword arguments as the body.

    Only `create` changes; `with_raw_response.create` goes through it: a completion posted
    directly comes back as a `DirectReply` (whole) or a `DirectStream` (streamed), one that
    took the SDK's path as the SDK's raw response.
    """

    def __init__(self, client: AsyncOpenAI, posts: DirectPosts | None = None) -> None:
        super().__init__(client)
        signs_each_request = (
            getattr(client, "_api_key_provider", None) is not None
            or getattr(client, "_provider_runtime", None) is not None
            or client.custom_auth is not None
        )
        self._posts = None if signs_each_request else posts
        self._direct: _DirectRequest | None = None

    async def create(self, **arguments: Any) -> Any:
        options = {name: arguments.pop(name) for name in _REQUEST_OPTIONS if name in arguments}
        stream = bool(arguments.get("stream"))
        wants_raw = options == _RAW_RESPONSE  # `with_raw_response.create`, as `ChatOpenAI` calls
        if self._posts is None or (options and not wants_raw):
            return await self._sdk_post(arguments, options, stream=stream)
        answered = await self._post_directly(self._posts, arguments, stream=stream)
        if answered is None:  # to be retried: the SDK's path, for the retries left
            retries_left = self._client.max_retries - 1
            return await self._sdk_post(arguments, options, stream=stream, max_retries=retries_left)
        return answered if wants_raw else answered.parse()

    async def _sdk_post(
        self,
        body: dict[str, Any],
        options: dict[str, Any],
        *,
        stream: bool = False,
        max_retries: int | None = None,
    ) -> Any:
        request_options = make_request_options(**options, security=_SECURITY)
        if max_retries is not None:
            request_options["max_retries"] = max_retries
        return await self._post(
            PATH,
            body=body,
            options=request_options,
            cast_to=object,  # the reply's JSON as it is: `ChatOpenAI` reads it as a dict
            stream=stream,
            stream_cls=AsyncStream[object],  # each chunk's JSON as it is, for the same reason
        )

    async def _post_directly(
        self, posts: DirectPosts, body: dict[str, Any], *, stream: bool
    ) -> DirectReply | DirectStream | None:
        """The reply to `body` posted once on `posts` (its chunks as they come, when streamed);
        the SDK's error where the SDK would not retry, or None after the SDK's wait where it
        would."""
        client = self._client
        direct = self._direct or self._first_attempt_request()
        self._direct = direct
        response: httpx2.Response | None = None
        try:
            answer = await posts.session().post(
                direct.url, data=openapi_dumps(body), headers=direct.headers, timeout=direct.timeout
            )
            if stream and 200 <= answer.status < 300:
                return DirectStream(answer, direct)
            async with answer:
                content = await answer.read()
            if 200 <= answer.status < 300:
                return DirectReply(json.loads(content), _named(answer.headers))
            response = httpx2.Response(
                answer.status,
                headers=list(answer.headers.items()),
                content=content,
                request=direct.request(),
            )
        except TimeoutError as error:
            if client.max_retries == 0:
                raise APITimeoutError(request=direct.request()) from error
        except aiohttp.ClientError as error:
            if client.max_retries == 0:
                raise APIConnectionError(request=direct.request()) from error
        if response is not None and (client.max_retries == 0 or not client._should_retry(response)):
            raise client._make_status_error_from_response(response) from None
        retry_options = FinalRequestOptions.construct(method="post", url=PATH)
        headers = response.headers if response is not None else None
        await asyncio.sleep(
            client._calculate_retry_timeout(client.max_retries, retry_options, headers)
        )
        return None

    def _first_attempt_request(self) -> _DirectRequest:
        """The URL, headers and timeout the SDK builds for a first attempt of this call."""
        options = FinalRequestOptions.construct(method="post", url=PATH, security=_SECURITY)
        request = self._client._build_request(options)
        timeout = request.extensions.get("timeout", {})
        return _DirectRequest(
            url=str(request.url),
            headers={
                name: value
                for name, value in request.headers.items()
                if name.lower() not in _AIOHTTPS_OWN_HEADERS
            },
            timeout=aiohttp.ClientTimeout(
                total=None,
                connect=timeout.get("pool"),
                sock_connect=timeout.get("connect"),
                sock_read=timeout.get("read"),
            ),
        )


@dataclass(frozen=True)
class DirectReply:
    """A whole completion posted directly, as `with_raw_response.create` gives it: what
    `ChatOpenAI` reads of the SDK's raw response (`parse()`, and `headers` named in lower case
    as there)."""

    body: Any
    headers: Mapping[str, str]

    def parse(self) -> Any:
        return self.body


class DirectStream:
    """A streamed completion posted directly: each chunk's JSON as the SDK's
    `AsyncStream[object]` gives it, read with the SDK's own SSE decoder, an `error` in a chunk
    raised as the SDK raises it, the connection given back at the end or on `close`. As
    `with_raw_response.create` gives it, it is also its own `parse()`."""

    def __init__(self, answer: aiohttp.ClientResponse, direct: _DirectRequest) -> None:
        self.headers = _named(answer.headers)
        self._answer = answer
        self._direct = direct
        self._chunks = self._read()

    def parse(self) -> DirectStream:
        return self

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._chunks

    async def __aenter__(self) -> DirectStream:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._chunks.aclose()
        self._answer.release()

    async def _read(self) -> AsyncGenerator[Any, None]:
        try:
            async for event in SSEDecoder().aiter_bytes(self._answer.content.iter_any()):
                if event.data.startswith("[DONE]"):
                    await self._answer.read()  # the rest, so that the connection is reused
                    return
                data = event.json()
                if isinstance(data, dict) and data.get("error"):
                    raise _stream_error(data["error"], self._direct.request())
                yield data
        except TimeoutError as error:
            raise APITimeoutError(request=self._direct.request()) from error
        except aiohttp.ClientError as error:
            raise APIConnectionError(request=self._direct.request()) from error
        finally:
            self._answer.release()


def _stream_error(error: Any, request: httpx2.Request) -> APIError:
    """The SDK's error for an `error` sent in a stream's chunk."""
    message = error.get("message") if isinstance(error, dict) else None
    if not message or not isinstance(message, str):
        message = "An error occurred during streaming"
    return APIError(message=message, request=request, body=error)


def _named(headers: Mapping[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


@dataclass(frozen=True)
class _DirectRequest:
    """What a first attempt sends, as the SDK builds it for a chat model's client."""

    url: str
    headers: dict[str, str]
    timeout: aiohttp.ClientTimeout

    def request(self) -> httpx2.Request:
        """The request as the SDK's errors carry it."""
        return httpx2.Request("POST", self.url, headers=self.headers)


def with_plain_bodies(chat_model: ChatOpenAI, posts: DirectPosts | None = None) -> ChatOpenAI:
    """`chat_model`, its async calls made through `PlainBodyCompletions` on its own client,
    whole completions posted on `posts` when given."""
    chat_model.async_client = PlainBodyCompletions(chat_model.root_async_client, posts)
    return chat_model
