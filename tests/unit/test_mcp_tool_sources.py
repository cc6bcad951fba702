"""MCP tool sources without a server: `McpToolbox.call` (a server's failure is an error result,
a database outage is raised), tool names, the address rule, the operator's file."""

from __future__ import annotations

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
import sqlalchemy.exc
from langchain_core.tools import StructuredTool

from juru.core.errors import InvalidFieldError
from juru.hosted.agents import check_mcp_servers
from juru.tools.mcp_network import NetworkPolicy, address_problem
from juru.tools.mcp_servers import McpConfigError, load_operator_servers
from juru.tools.mcp_toolbox import McpServices, McpToolbox, ServerTool, model_tool_name


def toolbox_raising(error: Exception) -> McpToolbox:
    async def broken() -> str:
        raise error

    tool = StructuredTool.from_function(coroutine=broken, name="broken", description="fails")
    toolbox = McpServices({}, NetworkPolicy(allow_private=True), 5.0).for_run("run_1", [], ())
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


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://[", "is not a URL"),
        ("http://[zz]/mcp", "is not a URL"),
        ("http://a..b/mcp", "does not resolve"),
        ("http://" + "a" * 64 + ".example/mcp", "does not resolve"),
        ("http://\udcff/mcp", "does not resolve"),
        ("http://:80/mcp", "has no host"),
        ("http://example.com:99999/mcp", "has an invalid port"),
    ],
)
async def test_a_url_that_cannot_be_reached_is_refused_naming_the_field(
    url: str, reason: str
) -> None:
    services = McpServices({}, NetworkPolicy(allow_private=False), 5.0)
    with pytest.raises(InvalidFieldError) as refused:
        await check_mcp_servers([{"name": "files", "url": url}], services)
    assert refused.value.path == "mcp_servers.0.url"
    assert reason in refused.value.reason


def test_the_operators_file_gives_named_servers(tmp_path: Path) -> None:
    path = tmp_path / "mcp.toml"
    path.write_text(
        '[servers.files]\ncommand = "python"\nargs = ["-m", "files"]\nallowed_tools = ["read"]\n'
        '[servers.search]\nurl = "https://search.internal/mcp"\n'
        'headers = { Authorization = "Bearer x" }\n'
    )
    servers = load_operator_servers(path)
    assert servers["files"].connection(7.0) == {
        "transport": "stdio",
        "command": "python",
        "args": ["-m", "files"],
    }
    assert servers["files"].allowed_tools == frozenset({"read"})
    assert servers["search"].connection(7.0)["headers"] == {"Authorization": "Bearer x"}
    assert load_operator_servers(None) == {}


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('[servers.x]\nurl = "https://a/mcp"\ncommand = "sh"\n', "either `url`"),
        ("[servers.x]\nargs = []\n", "either `url`"),
        ('[servers."a b"]\ncommand = "sh"\n', "server name 'a b'"),
        ('[servers.x]\ncommand = "sh"\nshell = true\n', "servers.x: shell"),
        ('[server.x]\ncommand = "sh"\n', "unknown tables ['server']"),
        ("[servers.x\n", "JURU_MCP_SERVERS"),
    ],
)
def test_a_wrong_operators_file_is_refused_saying_where(
    tmp_path: Path, text: str, names: str
) -> None:
    path = tmp_path / "mcp.toml"
    path.write_text(text)
    with pytest.raises(McpConfigError, match=re.escape(names)):
        load_operator_servers(path)


class _HostEcho(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"{self.headers['Host']} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


class _LoopbackPolicy(NetworkPolicy):
    """Checks every name as the real rule would, then answers loopback (only the transport's
    pinning is under test here)."""

    asked: list[str]

    async def checked_addresses(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        return ["127.0.0.1"]


async def test_a_request_goes_to_the_checked_address_under_its_host_name() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HostEcho)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        policy = _LoopbackPolicy(allow_private=False)
        policy.asked = []
        port = server.server_address[1]
        async with policy.http_client() as client:
            answer = await client.get(f"http://mcp.example.test:{port}/mcp")
        assert answer.text == f"mcp.example.test:{port} /mcp"
        assert policy.asked == ["mcp.example.test"]
    finally:
        server.shutdown()
        server.server_close()
