"""Agent definitions: validation against the catalog, the built-in tool set and the MCP
servers an agent may use."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from juru.core.errors import InvalidFieldError, invalid
from juru.core.text import public_message
from juru.models.catalog import ModelCatalog, UnknownModelError
from juru.tools.mcp_network import AddressRefusedError
from juru.tools.mcp_toolbox import McpServices

LIVE_BUILTIN_TOOLS = frozenset({"text_to_speech", "rag_search"})
UNAVAILABLE_BUILTIN_TOOLS = frozenset({"web_search", "generate_image"})
# What the API shows instead of an MCP server's header values; sent back in an update, it
# keeps the stored value.
HEADER_MASK = "***"


def check_model(catalog: ModelCatalog, model_id: str) -> None:
    """400 `unsupported_model` unless the model is in the catalog and may drive agents."""
    try:
        spec = catalog.get(model_id)
    except UnknownModelError:
        raise invalid(
            f"model {model_id!r} is not in the model catalog", "unsupported_model"
        ) from None
    if not spec.agents:
        raise invalid(
            f"model {model_id!r} cannot drive agents ({spec.label or 'not agent-capable'})",
            "unsupported_model",
        )


def check_builtin_tools(names: Sequence[str]) -> None:
    for name in names:
        if name in UNAVAILABLE_BUILTIN_TOOLS:
            raise invalid(
                f"built-in tool {name!r} is not available yet; run it as a client tool",
                "builtin_tool_unavailable",
            )
        if name not in LIVE_BUILTIN_TOOLS:
            known = ", ".join(sorted(LIVE_BUILTIN_TOOLS))
            raise invalid(f"unknown built-in tool {name!r}; known: {known}")
    if len(set(names)) != len(names):
        raise invalid("builtin_tools lists a tool twice")


def check_tool_names(
    tools: Sequence[dict[str, Any]],
    builtin_tools: Sequence[str],
    agent_tools: Sequence[dict[str, Any]] = (),
) -> None:
    names = [tool["function"]["name"] for tool in tools]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise invalid(f"tool names must be unique: {', '.join(duplicates)}")
    clashes = sorted(set(names) & set(builtin_tools))
    if clashes:
        raise invalid(f"tool names clash with built-in tools: {', '.join(clashes)}")
    for index, tool in enumerate(agent_tools):
        name = tool["name"]
        others = [other["name"] for other in agent_tools[:index]]
        if name in names or name in builtin_tools or name in others:
            raise invalid(
                f"agent_tools[{index}].name: {name!r} is already the name of another of the "
                "agent's tools"
            )


def check_agent_tool_targets(agent_tools: Sequence[dict[str, Any]], known: Collection[str]) -> None:
    """400 unless every agent tool names an agent of the same account (`known`)."""
    for index, tool in enumerate(agent_tools):
        if tool["agent_id"] not in known:
            raise invalid(
                f"agent_tools[{index}].agent_id: no agent {tool['agent_id']!r} in this account"
            )


def find_agent_cycle(agent_id: str, calls: Mapping[str, Collection[str]]) -> list[str] | None:
    """A path of calls from `agent_id` back to itself (`calls`: which agents each agent calls
    as tools), or None: an agent must never end up calling itself, however indirectly."""
    path: list[str] = [agent_id]
    done: set[str] = set()

    def visit(current: str) -> list[str] | None:
        for callee in sorted(calls.get(current, ())):
            if callee == agent_id:
                return [*path, callee]
            if callee in done or callee in path:
                continue
            path.append(callee)
            found = visit(callee)
            if found is not None:
                return found
            path.pop()
            done.add(callee)
        return None

    return visit(agent_id)


def parameters_problem(parameters: Any) -> str | None:
    """Why a tool's `parameters` is not a JSON Schema (2020-12) for an object, or None."""
    if not isinstance(parameters, dict):
        return "must be a JSON Schema object"
    try:
        Draft202012Validator.check_schema(parameters)
    except SchemaError as error:
        where = ".".join(str(part) for part in error.absolute_path)
        return f"not a valid JSON Schema{f' at {where}' if where else ''}: " + public_message(
            error.message
        )
    if parameters.get("type") != "object":
        return 'must describe an object (`"type": "object"`): tool arguments are an object'
    return None


async def check_mcp_servers(servers: Sequence[dict[str, Any]], mcp: McpServices) -> None:
    """400 naming the field unless every server is an operator-defined one named alone, or a
    URL whose host resolves to allowed addresses only (`InvalidFieldError`)."""
    names = [server["name"] for server in servers]
    for index, server in enumerate(servers):
        where = f"mcp_servers.{index}"
        name = server["name"]
        if names.count(name) > 1:
            raise InvalidFieldError(f"{where}.name", f"the server {name!r} is named twice")
        operator = mcp.operators.get(name)
        url = server.get("url")
        if url is None:
            if operator is None:
                raise InvalidFieldError(
                    f"{where}.url", f"required: no operator-defined server is named {name!r}"
                )
            if server.get("headers"):
                raise InvalidFieldError(
                    f"{where}.headers", f"the operator-defined server {name!r} has its own headers"
                )
            continue
        if operator is not None:
            raise InvalidFieldError(
                f"{where}.name",
                f"{name!r} is an operator-defined server: name it without a url, or give "
                "yours another name",
            )
        try:
            parts = urlsplit(url)
            hostname = parts.hostname
        except ValueError as error:
            raise InvalidFieldError(f"{where}.url", f"is not a URL: {error}") from None
        if hostname is None:
            raise InvalidFieldError(f"{where}.url", "has no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise InvalidFieldError(f"{where}.url", "has an invalid port") from None
        try:
            await mcp.network.checked_addresses(hostname, port)
        except AddressRefusedError as error:
            raise InvalidFieldError(f"{where}.url", str(error)) from None


def keep_masked_headers(
    servers: Sequence[dict[str, Any]], stored: Sequence[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """`servers` with each header value sent back as the mask replaced by the value stored
    for the same server (same name and url) and header; 400 naming the field when there is
    none, so a stored secret is never sent to a url it was not given for."""
    before = {server["name"]: server for server in stored or []}
    kept: list[dict[str, Any]] = []
    for index, server in enumerate(servers):
        headers = dict(server.get("headers") or {})
        for header, value in headers.items():
            if value != HEADER_MASK:
                continue
            same = before.get(server["name"])
            if same is None or same.get("url") != server.get("url"):
                known: dict[str, str] = {}
            else:
                known = same.get("headers") or {}
            if header not in known:
                raise InvalidFieldError(
                    f"mcp_servers.{index}.headers.{header}",
                    f"{HEADER_MASK!r} stands for the value stored for this server and url, "
                    "and there is none",
                )
            headers[header] = known[header]
        kept.append({**server, "headers": headers} if server.get("headers") else server)
    return kept


def masked_servers(servers: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """An agent's MCP servers as the API shows them: every header value masked."""
    return [
        {**server, "headers": dict.fromkeys(server["headers"], HEADER_MASK)}
        if server.get("headers")
        else dict(server)
        for server in servers or []
    ]
