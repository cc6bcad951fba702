"""A fast, scripted, OpenAI-compatible model server for the benchmarks, in its own process.

Every `POST .../chat/completions` waits `--latency` seconds, then answers. The script is
stateless, read from the request: while the current turn (the messages after the last user
message) holds fewer than `--tool-calls` assistant messages, the reply calls `--tool-name` once
(with a counter in its arguments, so loop detection never fires); after that it answers with
text: "done", or with `--answer-words N`, N words (streamed one word a chunk, for what reading
a long stream costs). `stream: true` gets SSE chunks `--chunk-delay` seconds apart. The server
is a bare asyncio protocol on httptools (and uvloop when installed): it must never be what a
benchmark measures.

    python -m bench.fake_model --port 0 --latency 0.2 --tool-calls 4

prints `LISTENING http://127.0.0.1:PORT/v1` once it accepts connections. `GET /_stats` answers
`{"requests": served chat completions, "cpu_seconds": this process's CPU time}`;
`POST /_control` with `{"latency": seconds}` changes the latency of later calls. `GET /_stamps`
answers the last 10,000 calls' `[arrived, answered]` times, on the machine's monotonic clock
(the latency scenario lines them up with the server's stamps).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import time
import uuid
from collections import deque
from typing import Any

import httptools

JSON = dict[str, Any]
USAGE = {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}


class ModelScript:
    """The latency, the tool-call count and the precomputed parts of every answer."""

    def __init__(
        self,
        latency: float,
        tool_calls: int,
        tool_name: str,
        chunk_delay: float = 0.0,
        answer_words: int = 0,
    ) -> None:
        self.latency = latency
        self.tool_calls = tool_calls
        self.tool_name = tool_name
        self.chunk_delay = chunk_delay
        self.answer_words = answer_words
        self.answer = " ".join(f"word{n}" for n in range(answer_words)) if answer_words else "done"
        self.requests = 0
        self.stamps: deque[tuple[float, float]] = deque(maxlen=10_000)

    def steps_in_turn(self, messages: list[JSON]) -> int:
        """Assistant messages since the last user message: the model calls of this turn."""
        count = 0
        for message in reversed(messages):
            role = message.get("role")
            if role == "user":
                break
            count += role == "assistant"
        return count

    def reply(self, body: JSON) -> tuple[str | None, JSON | None]:
        """(text, tool call) of the answer to `body`."""
        step = self.steps_in_turn(body.get("messages") or [])
        if step < self.tool_calls and body.get("tools"):
            call = {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": self.tool_name, "arguments": f'{{"step":{step}}}'},
            }
            return None, call
        return self.answer, None

    def completion(self, body: JSON) -> bytes:
        text, call = self.reply(body)
        message: JSON = {"role": "assistant", "content": text}
        if call is not None:
            message["tool_calls"] = [call]
        answer = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "stop" if call is None else "tool_calls",
                }
            ],
            "usage": USAGE,
        }
        return json.dumps(answer, separators=(",", ":")).encode()

    def chunks(self, body: JSON) -> list[bytes]:
        """The SSE events of a streamed answer, `data: [DONE]` included."""
        text, call = self.reply(body)
        base = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
        }
        deltas: list[JSON] = [{"role": "assistant", "content": ""}]
        if call is not None:
            deltas.append({"tool_calls": [{"index": 0, **call}]})
        else:
            text = text or ""
            if self.answer_words:
                pieces = [f" {word}" if n else word for n, word in enumerate(text.split(" "))]
            else:
                pieces = [text[:2], text[2:]]
            deltas.extend({"content": piece} for piece in pieces)
        events = [
            {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
            for delta in deltas
        ]
        finish = "stop" if call is None else "tool_calls"
        events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**base, "choices": [], "usage": USAGE})
        lines = [b"data: " + json.dumps(event, separators=(",", ":")).encode() for event in events]
        return [line + b"\n\n" for line in [*lines, b"data: [DONE]"]]


def _response(status: str, body: bytes, content_type: bytes = b"application/json") -> bytes:
    head = (
        b"HTTP/1.1 " + status.encode() + b"\r\ncontent-type: " + content_type
        + b"\r\ncontent-length: " + str(len(body)).encode() + b"\r\n\r\n"
    )  # fmt: skip
    return head + body


class ModelProtocol(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; requests on it are answered in order."""

    def __init__(self, script: ModelScript) -> None:
        self.script = script
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.url = b""
        self.body: list[bytes] = []
        self.pending: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self.transport is not None:
                self.transport.write(_response("400 Bad Request", b"{}"))
                self.transport.close()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        method = self.parser.get_method()
        url, body = self.url.split(b"?")[0], b"".join(self.body)
        self.url, self.body = b"", []
        previous = self.pending
        self.pending = asyncio.get_running_loop().create_task(
            self.answer(previous, method, url, body)
        )

    async def answer(
        self, previous: asyncio.Task[None] | None, method: bytes, url: bytes, body: bytes
    ) -> None:
        if previous is not None:
            await previous
        if method == b"POST" and url.endswith(b"/chat/completions"):
            await self.chat(json.loads(body))
        elif url == b"/_stats":
            cpu = time.process_time()
            stats = {"requests": self.script.requests, "cpu_seconds": cpu}
            self.write(_response("200 OK", json.dumps(stats).encode()))
        elif url == b"/_stamps":
            self.write(_response("200 OK", json.dumps(list(self.script.stamps)).encode()))
        elif method == b"POST" and url == b"/_control":
            self.script.latency = float(json.loads(body)["latency"])
            self.write(_response("200 OK", b"{}"))
        elif url in (b"/health", b"/v1/models"):
            self.write(_response("200 OK", b'{"object":"list","data":[]}'))
        else:
            self.write(_response("404 Not Found", b'{"error":{"message":"not found"}}'))

    async def chat(self, body: JSON) -> None:
        arrived = time.monotonic()
        if self.script.latency:
            await asyncio.sleep(self.script.latency)
        self.script.requests += 1
        if not body.get("stream"):
            answer = _response("200 OK", self.script.completion(body))
            # Stamped before the answer leaves: once it is sent, the caller may read it (and
            # stamp its own reading) before this process runs again.
            self.script.stamps.append((arrived, time.monotonic()))
            self.write(answer)
            return
        self.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        for index, chunk in enumerate(self.script.chunks(body)):
            if index and self.script.chunk_delay:
                await asyncio.sleep(self.script.chunk_delay)
            self.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        self.script.stamps.append((arrived, time.monotonic()))
        self.write(b"0\r\n\r\n")

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


async def serve(host: str, port: int, script: ModelScript) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: ModelProtocol(script), host, port, backlog=4096)
    bound = server.sockets[0].getsockname()[1]
    print(f"LISTENING http://{host}:{bound}/v1", flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fake_model", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds before each answer")
    parser.add_argument("--tool-calls", type=int, default=4, help="tool calls before the answer")
    parser.add_argument("--tool-name", default="bench_tool")
    parser.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between chunks")
    parser.add_argument(
        "--answer-words", type=int, default=0, help="words of the text answer (0: 'done')"
    )
    args = parser.parse_args(argv)
    script = ModelScript(
        args.latency, args.tool_calls, args.tool_name, args.chunk_delay, args.answer_words
    )
    runner: Any = asyncio.run
    with contextlib.suppress(ImportError):
        import uvloop

        runner = uvloop.run
    runner(serve(args.host, args.port, script))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
