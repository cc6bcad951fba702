"""`/mcp`: the account's agents as MCP tools, over Streamable HTTP with the official MCP SDK.

An MCP client (an IDE, a desktop assistant, another agent framework) connects with a Bearer
API key and sees the key's agents as tools (`juru.http.mcp_server`). The transport is
stateless: every request stands alone, so any process of a `juru serve` answers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from juru.core.errors import DomainError
from juru.http.errors import domain_error_response

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

MCP_PATH = "/mcp"


class McpEndpoint:
    """The ASGI app at `/mcp`: the Bearer key's account within its rate limit (else the `/v1`
    envelope's 401 or 429), then the SDK's transport. The SDK is imported at the first call,
    not at start-up (it costs every server process a quarter of a second)."""

    def __init__(self) -> None:
        self._server: Server[Any, Request] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        context = request.app.state.context
        try:
            caller = await context.access.admit(request.headers.get("authorization"))
        except DomainError as error:
            await domain_error_response(error)(scope, receive, send)
            return
        from juru.http import mcp_server

        scope.setdefault("state", {})[mcp_server.ACCOUNT_STATE] = caller.account_id
        if self._server is None:
            self._server = mcp_server.agent_server()
        await mcp_server.serve(self._server, scope, receive, send)
