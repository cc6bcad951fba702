"""`McpToolbox.call`: a server's failure is an error result; a database outage is raised."""

from __future__ import annotations

import httpx
import pytest
import sqlalchemy.exc
from langchain_core.tools import StructuredTool

from juru.tools.mcp_network import NetworkPolicy, address_problem
from juru.tools.mcp_toolbox import McpServices, McpToolbox, ServerTool, model_tool_name


def toolbox_raising(error: Exception) -> McpToolbox:
    async def broken() -> str:
        raise error

    tool = StructuredTool.from_function(coroutine=broken, name="broken", description="fails")
    toolbox = McpServices({}, NetworkPolicy(allow_private=True), 5.0).for_run([], ())
    toolbox.tools = {"s__broken": ServerTool("s", tool, {})}
    return toolbox


CALL = {"id": "call_1", "name": "s__broken", "args": {}}


async def test_a_refused_connection_is_an_error_result_not_an_outage() -> None:
    refused = httpx.ConnectError("connection refused")
    refused.__cause__ = ConnectionRefusedError(111, "Connection refused")
    result = await toolbox_raising(refused).call(CALL)
    assert result.status == "error" and result.name == "s__broken"
    assert str(result.content).startswith("Error: the call to MCP server 's' failed: ConnectError")


async def test_a_database_outage_is_raised() -> None:
    lost = sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("gone"))
    lost.connection_invalidated = True
    with pytest.raises(sqlalchemy.exc.OperationalError):
        await toolbox_raising(lost).call(CALL)


def test_model_tool_names_are_what_providers_accept() -> None:
    assert model_tool_name("files", "read.file v2") == "files__read_file_v2"
    assert len(model_tool_name("s" * 32, "t" * 100)) == 64


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:10.0.0.1", "a private address"),
        ("169.254.169.254", "a link-local address"),
        ("192.168.1.1", "a private address"),
        ("100.64.0.1", "not a public address"),
        ("0.0.0.0", "a private address"),
        ("224.0.0.1", "not a public address"),
        ("93.184.215.14", None),
    ],
)
def test_only_public_addresses_pass(address: str, problem: str | None) -> None:
    assert address_problem(address) == problem
