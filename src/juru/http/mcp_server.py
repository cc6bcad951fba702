"""The MCP SDK's side of `/mcp` (`juru.http.mcp`): `tools/list` shows each of the key's
agents whose runs never wait for client tools, `tools/call` runs one to its end
(`hosted.agent_calls`) with a progress notification per finished step, over a stateless
Streamable HTTP transport."""

from __future__ import annotations

from typing import Any

import anyio
from anyio.abc import TaskStatus
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

import juru
from juru.core.errors import DomainError, InvalidRequestError
from juru.hosted.agent_calls import AgentCalls

ACCOUNT_STATE = "juru_account_id"  # in the request's scope state, set by `McpEndpoint`
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "input": {"type": "string", "description": "The message for the agent."},
        "thread_id": {
            "type": "string",
            "description": "Continue one of the agent's threads (a new thread when absent).",
        },
    },
    "required": ["input"],
    "additionalProperties": False,
}


def agent_server() -> Server[Any, Request]:
    server: Server[Any, Request] = Server("juru", version=juru.__version__)

    def request() -> Request:
        current = server.request_context.request
        assert current is not None  # the transport hands every handler its HTTP request
        return current

    def account() -> str:
        account_id: str = request().scope["state"][ACCOUNT_STATE]  # set by McpEndpoint
        return account_id

    def agent_calls() -> AgentCalls:
        return AgentCalls(request().app.state.context.hosted)

    @server.list_tools()  # type: ignore[no-untyped-call,untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(name=tool.name, description=tool.description, inputSchema=INPUT_SCHEMA)
            for tool in await agent_calls().tools(account())
        ]

    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            text, thread_id = _arguments(arguments)
            calls = agent_calls()
            tool = await calls.tool(account(), name)
            called = await calls.call(account(), tool, text, thread_id, _progress(server))
        except DomainError as error:
            return _error_result(f"{error.code}: {error.message}")
        run = called.run
        summary = {
            "run_id": run.id,
            "thread_id": run.thread_id,
            "status": run.status,
            "step_count": run.step_count,
            "cost_rupiah": str(run.cost_rupiah),
        }
        if run.status != "succeeded":
            reason = called.stopped or run.error or f"the run ended {run.status}"
            return _error_result(f"the agent did not finish: {reason}", summary)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=run.output or "")],
            structuredContent=summary,
        )

    return server


def _arguments(arguments: dict[str, Any]) -> tuple[str, str | None]:
    unknown = sorted(set(arguments) - {"input", "thread_id"})
    if unknown:
        raise InvalidRequestError(f"unknown arguments: {', '.join(unknown)}")
    text, thread_id = arguments.get("input"), arguments.get("thread_id")
    if not isinstance(text, str):
        raise InvalidRequestError("input must be a string")
    if thread_id is not None and not isinstance(thread_id, str):
        raise InvalidRequestError("thread_id must be a string")
    return text, thread_id


def _progress(server: Server[Any, Request]) -> Any:
    context = server.request_context
    token = context.meta.progressToken if context.meta else None

    async def report(done: int, total: int, message: str) -> None:
        if token is not None:
            await context.session.send_progress_notification(
                token, done, total, message, related_request_id=str(context.request_id)
            )

    return report


def _error_result(message: str, summary: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=message)],
        structuredContent=summary,
        isError=True,
    )


async def serve(server: Server[Any, Request], scope: Scope, receive: Receive, send: Send) -> None:
    """One request: a transport and a server task of its own, in a task group that lives as
    long as the request (the SDK's session manager keeps one task group for the app's whole
    life instead, which would tie `/mcp` to the task that ran the app's startup)."""
    transport = StreamableHTTPServerTransport(mcp_session_id=None)

    async def run_server(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        async with transport.connect() as (read, write):
            task_status.started()
            options = server.create_initialization_options()
            await server.run(read, write, options, stateless=True)

    async with anyio.create_task_group() as tasks:
        await tasks.start(run_server)
        try:
            await transport.handle_request(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await transport.terminate()
