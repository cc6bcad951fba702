"""Real MCP servers for tests: the installed SDK's FastMCP over Streamable HTTP in a thread, and
the newest SDK (2.x, in `.venv-mcp2`, made by scripts/test's install step) in a subprocess.

Both listen on a socket bound before the server starts (port 0, then `listen`), so a client can
connect as soon as the port is known: no waiting for the server to come up.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server.fastmcp import Context, FastMCP
from starlette.types import ASGIApp, Message, Receive, Scope, Send

REPO = Path(__file__).resolve().parents[2]
MCP2_PYTHON = REPO / ".venv-mcp2" / "bin" / "python"
MCP2_SCRIPT = Path(__file__).with_name("mcp2_server.py")
STDIO_SCRIPT = Path(__file__).with_name("mcp_stdio_server.py")
BIG_RESULT_CHARACTERS = 50_000
REQUIRE_MCP2 = os.environ.get("JURU_REQUIRE_MCP2") == "1"


@contextmanager
def refusing_port() -> Iterator[int]:
    """A port bound but not listening while the block runs: connections to it are refused."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
    finally:
        sock.close()


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def tools_server() -> FastMCP:
    """The test tools: `echo`, `add`, `whoami` (the X-Token header it was sent), `big` (a long
    result) and `fail` (a tool error)."""
    server = FastMCP("juru-test-tools", stateless_http=True, json_response=True)

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        return f"echo: {text}"

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    @server.tool()
    def whoami(ctx: Context[Any, Any, Any]) -> str:
        """The X-Token header of the request."""
        request = ctx.request_context.request
        headers = getattr(request, "headers", {})
        return f"token={headers.get('x-token', '')}"

    @server.tool()
    def big() -> str:
        """A long text."""
        return "x" * BIG_RESULT_CHARACTERS

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails."""
        raise ValueError(f"failing on purpose: {reason}")

    return server


class Recorder:
    """ASGI middleware: counts the JSON-RPC methods the server is sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.methods: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        method = str(json.loads(body or b"{}").get("method"))
        self.methods[method] += 1

        async def replay() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


class ThreadedMcpServer:
    """`tools_server()` over Streamable HTTP at `url`, served by uvicorn in a thread."""

    def __init__(self, on_trigger: Callable[[], None] | None = None) -> None:
        mcp = tools_server()
        self.recorder = Recorder(mcp.streamable_http_app())

        @mcp.tool()
        async def go_down() -> str:
            """Stop listening (in the server's event loop, before this answer is sent): every
            later connection is refused."""
            for listener in self.server.servers:
                listener.close()
            return "going down"

        @mcp.tool()
        def trigger() -> str:
            """Run the test's hook (in the server's thread, before answering)."""
            if on_trigger is not None:
                on_trigger()
            return "triggered"

        self.sock = listening_socket()
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        config = uvicorn.Config(self.recorder, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    def __enter__(self) -> ThreadedMcpServer:
        self.thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@contextmanager
def mcp2_server() -> Iterator[str]:
    """A server built with the newest SDK (2.x) in its own venv; yields its URL."""
    with subprocess.Popen(
        [str(MCP2_PYTHON), str(MCP2_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None and process.stderr is not None
            line = process.stdout.readline().strip()
            if not line.isdigit():
                process.wait(timeout=10)
                errors = process.stderr.read()
                raise RuntimeError(f"the MCP 2.x server did not start: {line} {errors[-2000:]}")
            yield f"http://127.0.0.1:{line}/mcp"
        finally:
            process.terminate()
            process.wait(timeout=10)
