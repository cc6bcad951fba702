"""Chat completions sent with the body LangChain built, without the OpenAI SDK's second pass.

`ChatOpenAI` builds a request body of plain JSON values and hands it to the SDK's
`chat.completions.create`, which walks the whole body again against the request's TypedDict
(`async_maybe_transform`) before posting it. For a chat completion that walk changes nothing
(none of its fields is renamed or reformatted), and it costs more than the rest of the model
client together: about 2 ms per call for a five-step run's messages, 18 ms for sixty messages,
growing with the thread. `PlainBodyCompletions` posts the body as it is, through the same client
(its connection pool, retries, headers, errors and streamed chunk types).

A whole reply comes back as the JSON object it was, not as the SDK's `ChatCompletion` model,
and so does each chunk of a streamed one (not a `ChatCompletionChunk`): `ChatOpenAI` reads
them as dicts, and would otherwise dump the model it was just given back into one (building
and dumping it cost about 0.2 ms a call, and as much again for every chunk of a stream).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openai import AsyncStream
from openai._base_client import make_request_options
from openai.resources.chat.completions import AsyncCompletions

if TYPE_CHECKING:
    from langchain_openai import ChatOpenAI

# The keyword arguments of `create` that are request options rather than fields of the body.
_REQUEST_OPTIONS = ("extra_headers", "extra_query", "extra_body", "timeout")


class PlainBodyCompletions(AsyncCompletions):
    """`AsyncOpenAI.chat.completions` whose `create` posts its keyword arguments as the body.

    Only `create` changes; `with_raw_response.create` goes through it as in the SDK.
    """

    async def create(self, **arguments: Any) -> Any:
        options = {name: arguments.pop(name) for name in _REQUEST_OPTIONS if name in arguments}
        stream = bool(arguments.get("stream"))
        return await self._post(
            "/chat/completions",
            body=arguments,
            options=make_request_options(**options, security={"bearer_auth": True}),
            cast_to=object,  # the reply's JSON as it is: `ChatOpenAI` reads it as a dict
            stream=stream,
            stream_cls=AsyncStream[object],  # each chunk's JSON as it is, for the same reason
        )


def with_plain_bodies(chat_model: ChatOpenAI) -> ChatOpenAI:
    """`chat_model`, its async calls made through `PlainBodyCompletions` on its own client."""
    chat_model.async_client = PlainBodyCompletions(chat_model.root_async_client)
    return chat_model
