"""The tools of an agent's MCP servers for one run.

Each server's tool list is fetched once per run in a process (on the first model step that
needs it) and kept for the run's later executions; each call opens its own MCP session
(langchain-mcp-adapters over the official SDK), bounded by the timeout. The model sees a
server's tool `read` as `<server>__read`, so the transcript and the run's events name the
server. Whatever goes wrong with a server (refused address, no answer, timeout, the tool's own
error) is an `Error: ...` result for the model.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from juru.store.outage import is_database_outage
from juru.tools.mcp_network import NetworkPolicy
from juru.tools.mcp_servers import OperatorServer

if TYPE_CHECKING:
    from langchain_mcp_adapters.sessions import Connection

logger = logging.getLogger(__name__)

SEPARATOR = "__"
# The most characters of one MCP result the model is given; the rest is cut with a note.
MAX_RESULT_CHARACTERS = 16_000
MAX_DESCRIPTION_CHARACTERS = 1_000
_NOT_IN_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def model_tool_name(server: str, tool: str) -> str:
    """What the model calls a server's tool: `<server>__<tool>`, in the characters and length
    providers accept."""
    return _NOT_IN_NAME.sub("_", f"{server}{SEPARATOR}{tool}")[:64]


def truncated(text: str, limit: int = MAX_RESULT_CHARACTERS) -> str:
    if len(text) <= limit:
        return text
    return (
        text[:limit] + f"\n[truncated: the result had {len(text)} characters; the first "
        f"{limit} are shown]"
    )


def result_text(content: Any) -> str:
    """An MCP result's content blocks as text (other kinds named, not inlined)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif isinstance(block, dict):
            parts.append(f"[{block.get('type', 'content')} content not shown]")
    return "\n".join(parts)


def failure_text(error: BaseException) -> str:
    """A failure as one line for the model: the innermost error of an exception group."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return "the MCP server did not answer in time"
    detail = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {detail}" if detail else type(error).__name__


@dataclass(frozen=True)
class ServerTool:
    server: str
    tool: BaseTool
    schema: dict[str, Any]


@dataclass
class McpServices:
    """What MCP tool sources need from the app, shared by every run."""

    operators: dict[str, OperatorServer]
    network: NetworkPolicy
    timeout_seconds: float
    # The toolboxes of the runs lately executed here, so that a run's later executions (after
    # each pause for client tools) keep its servers' tool lists instead of listing them again.
    capacity: int = 1024
    _toolboxes: OrderedDict[tuple[str, str], McpToolbox] = field(default_factory=OrderedDict)

    def for_run(
        self, run_id: str, servers: Sequence[dict[str, Any]], reserved: Iterable[str]
    ) -> McpToolbox:
        """The tools of `servers` (an agent's `mcp_servers`) for run `run_id`, listed once by
        this process while the run's agent keeps those servers; names in `reserved` (the
        agent's client, built-in and agent tools) are never given to MCP tools."""
        frozen = frozenset(reserved)
        spec = json.dumps([servers, sorted(frozen)], sort_keys=True, default=str)
        key = (run_id, hashlib.sha256(spec.encode()).hexdigest())
        toolbox = self._toolboxes.get(key)
        if toolbox is None:
            toolbox = self._toolboxes[key] = McpToolbox(self, servers, frozen)
            if len(self._toolboxes) > self.capacity:
                self._toolboxes.popitem(last=False)
        else:
            self._toolboxes.move_to_end(key)
        return toolbox


class McpToolbox:
    def __init__(
        self, services: McpServices, servers: Sequence[dict[str, Any]], reserved: frozenset[str]
    ) -> None:
        self.services = services
        self.servers = list(servers)
        self.reserved = reserved
        self.tools: dict[str, ServerTool] | None = None
        self._listing: asyncio.Lock = asyncio.Lock()

    def connection(self, server: dict[str, Any]) -> dict[str, Any]:
        timeout = self.services.timeout_seconds
        operator = self.services.operators.get(server["name"])
        if server.get("url") is None and operator is not None:
            return operator.connection(timeout)
        return {
            "transport": "streamable_http",
            "url": server["url"],
            "headers": dict(server.get("headers") or {}),
            "timeout": timeout,
            "sse_read_timeout": timeout,
            "httpx_client_factory": self.services.network.http_client,
        }

    def allowed(self, server: dict[str, Any]) -> frozenset[str] | None:
        """The tools of `server` the agent may use (None: all)."""
        chosen = server.get("allowed_tools")
        allowed = None if chosen is None else frozenset(chosen)
        operator = self.services.operators.get(server["name"])
        if server.get("url") is None and operator is not None and operator.allowed_tools:
            allowed = (
                operator.allowed_tools if allowed is None else allowed & operator.allowed_tools
            )
        return allowed

    async def schemas(self) -> list[dict[str, Any]]:
        """The function schemas of every server's allowed tools (listed once per run; a server
        that cannot be listed adds none, and the run goes on)."""
        async with self._listing:
            if self.tools is None:
                self.tools = await self._list_all()
        return [tool.schema for tool in self.tools.values()]

    def owns(self, name: str) -> bool:
        return self.tools is not None and name in self.tools

    async def _list_all(self) -> dict[str, ServerTool]:
        listed = await asyncio.gather(*(self._list(server) for server in self.servers))
        tools: dict[str, ServerTool] = {}
        for found in listed:
            for tool in found:
                name = tool.schema["function"]["name"]
                if name in self.reserved or name in tools:
                    logger.warning("MCP tool %s skipped: its name is taken", name)
                    continue
                tools[name] = tool
        return tools

    async def _list(self, server: dict[str, Any]) -> list[ServerTool]:
        # The adapters bring the MCP SDK: imported by the first run that uses a server, not by
        # every process at start (a few tenths of a second each).
        from langchain_mcp_adapters.tools import load_mcp_tools

        name = server["name"]
        try:
            async with asyncio.timeout(self.services.timeout_seconds):
                found = await load_mcp_tools(
                    None,
                    connection=cast("Connection", self.connection(server)),
                    server_name=name,
                )
        except Exception as error:
            if is_database_outage(error):
                raise
            logger.warning("MCP server %s: its tools could not be listed: %s", name, error)
            return []
        allowed = self.allowed(server)
        return [
            ServerTool(name, tool, self._schema(name, tool))
            for tool in found
            if allowed is None or tool.name in allowed
        ]

    @staticmethod
    def _schema(server: str, tool: BaseTool) -> dict[str, Any]:
        parameters = tool.args_schema if isinstance(tool.args_schema, dict) else None
        if not parameters or parameters.get("type") != "object":
            parameters = {"type": "object", "properties": {}}
        about = (tool.description or "").strip()[:MAX_DESCRIPTION_CHARACTERS]
        origin = f"(tool {tool.name!r} of MCP server {server!r})"
        return {
            "type": "function",
            "function": {
                "name": model_tool_name(server, tool.name),
                "description": f"{about} {origin}".strip(),
                "parameters": parameters,
            },
        }

    async def call(self, call: dict[str, Any]) -> ToolMessage:
        """Run one tool call of the model; every failure is an error result."""
        name = call["name"]
        found = (self.tools or {}).get(name)
        if found is None:
            return self._error(call, f"this agent has no MCP tool named {name!r}.")
        request = {"type": "tool_call", "id": call["id"], "name": found.tool.name}
        try:
            async with asyncio.timeout(self.services.timeout_seconds):
                answer = await found.tool.ainvoke({**request, "args": call["args"]})
        except Exception as error:
            if is_database_outage(error):
                raise  # not the server's failure: the run stops and redoes the step later
            logger.info("MCP call %s failed: %s", name, error, exc_info=True)
            return self._error(
                call, f"the call to MCP server {found.server!r} failed: {failure_text(error)}"
            )
        assert isinstance(answer, ToolMessage)
        text = result_text(answer.content)
        if answer.status == "error":
            return self._error(call, f"the MCP tool reported an error: {text}")
        return ToolMessage(truncated(text), tool_call_id=call["id"], name=name)

    @staticmethod
    def _error(call: dict[str, Any], reason: str) -> ToolMessage:
        return ToolMessage(
            truncated(f"Error: {reason}"),
            tool_call_id=call["id"],
            name=call["name"],
            status="error",
        )
