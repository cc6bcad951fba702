"""The terminal's pure parts: which key is used, agent YAML checks, one-line errors, `--tools`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from juru.client import APIConnectionError, AsyncJuru, InvalidRequestError, Juru
from juru.client.models import Agent, ToolCall
from juru.client.tool_calls import run_blocking
from juru.terminal.agent_files import AgentFileError, agents_table, parse_agent_yaml
from juru.terminal.chat import ToolsLoadError, load_tool_handlers
from juru.terminal.connection import KeyChoice, choose_api_key, error_line


def local_key(directory: Path, key: str = "juru_live_local") -> Path:
    (directory / ".juru").mkdir()
    (directory / ".juru" / "local-api-key").write_text(key + "\n")
    return directory


def test_the_key_option_wins_then_the_environment_then_the_local_key(tmp_path: Path) -> None:
    cwd = local_key(tmp_path)
    env = {"JURU_API_KEY": "juru_live_env"}
    assert choose_api_key("juru_live_opt", env, cwd) == KeyChoice("juru_live_opt")
    assert choose_api_key(None, env, cwd) == KeyChoice("juru_live_env")
    found = choose_api_key(None, {}, cwd)
    assert found.api_key == "juru_live_local"
    assert found.note == "using the local key in .juru/local-api-key"
    assert choose_api_key(None, {}, tmp_path / "elsewhere") == KeyChoice(None)


def test_an_agent_file_is_a_mapping_of_the_agents_fields() -> None:
    text = "name: Cuaca\nmodel_id: juru/demo\nmax_steps: 5\n"
    assert parse_agent_yaml(text, "a.yaml") == {
        "name": "Cuaca",
        "model_id": "juru/demo",
        "max_steps": 5,
    }
    with pytest.raises(AgentFileError, match=r"^a\.yaml line 3, column 4: expected "):
        parse_agent_yaml("name: x\nmodel_id: [a\n  b: c\n", "a.yaml")
    with pytest.raises(AgentFileError, match="expected a mapping of agent fields, found nothing"):
        parse_agent_yaml("", "a.yaml")
    with pytest.raises(AgentFileError, match="found a str"):
        parse_agent_yaml("just text", "a.yaml")
    with pytest.raises(AgentFileError, match="found a list"):
        parse_agent_yaml("- name: x\n", "a.yaml")
    with pytest.raises(AgentFileError, match=r"^a\.yaml line 2, column"):
        parse_agent_yaml("name: x\n  model_id: y\n", "a.yaml")
    with pytest.raises(AgentFileError, match=r"unknown keys: model, tool \(an agent has: name,"):
        parse_agent_yaml("name: x\ntool: []\nmodel: y\n", "a.yaml")


def test_an_agent_file_may_name_agent_tools_and_mcp_servers() -> None:
    text = """\
name: Desk
model_id: juru/demo
agent_tools:
  - {agent_id: agt_1, name: ask_weather, description: The weather agent}
mcp_servers:
  - name: notes
  - name: tools
    url: https://tools.example.com/mcp
    headers: {Authorization: Bearer t}
    allowed_tools: [echo]
"""
    fields = parse_agent_yaml(text, "a.yaml")
    assert fields["agent_tools"] == [
        {"agent_id": "agt_1", "name": "ask_weather", "description": "The weather agent"}
    ]
    assert fields["mcp_servers"] == [
        {"name": "notes"},
        {
            "name": "tools",
            "url": "https://tools.example.com/mcp",
            "headers": {"Authorization": "Bearer t"},
            "allowed_tools": ["echo"],
        },
    ]


AGENT_ANSWER = {
    "id": "agt_1",
    "name": "Desk",
    "model_id": "juru/demo",
    "system_prompt": "",
    "tools": [],
    "builtin_tools": [],
    "agent_tools": [],
    "max_steps": 20,
    "created_at": "2026-12-02T00:00:00Z",
    "updated_at": "2026-12-02T00:00:00Z",
}
AGENT_TOOLS = [{"agent_id": "agt_0", "name": "ask_weather"}]
MCP_SERVERS = [{"name": "tools", "url": "https://tools.example.com/mcp"}]


def recording_transport(sent: list[tuple[str, Any]]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        sent.append((request.method, json.loads(request.content)))
        return httpx.Response(200, json=AGENT_ANSWER)

    return httpx.MockTransport(answer)


def test_both_clients_send_agent_tools_and_mcp_servers_on_create_and_update() -> None:
    sent: list[tuple[str, Any]] = []
    with Juru("http://juru.test", "k") as juru:
        juru.http = httpx.Client(base_url="http://juru.test", transport=recording_transport(sent))
        juru.agents.create("Desk", "juru/demo", agent_tools=AGENT_TOOLS, mcp_servers=MCP_SERVERS)
        juru.agents.update("agt_1", agent_tools=AGENT_TOOLS, mcp_servers=MCP_SERVERS)
        juru.agents.update("agt_1", mcp_servers=[])

    async def with_the_async_client() -> None:
        async with AsyncJuru("http://juru.test", "k") as juru:
            await juru.http.aclose()
            juru.http = httpx.AsyncClient(
                base_url="http://juru.test", transport=recording_transport(sent)
            )
            await juru.agents.create(
                "Desk", "juru/demo", agent_tools=AGENT_TOOLS, mcp_servers=MCP_SERVERS
            )
            await juru.agents.update("agt_1", agent_tools=AGENT_TOOLS, mcp_servers=MCP_SERVERS)
            await juru.agents.update("agt_1", mcp_servers=[])

    asyncio.run(with_the_async_client())
    tools = {"agent_tools": AGENT_TOOLS, "mcp_servers": MCP_SERVERS}
    expected = [
        ("POST", {"name": "Desk", "model_id": "juru/demo", **tools}),
        ("PATCH", tools),
        ("PATCH", {"mcp_servers": []}),
    ]
    assert sent == expected * 2


def test_the_agents_table_lists_every_kind_of_tool() -> None:
    agent = Agent.model_validate(
        {
            **AGENT_ANSWER,
            "tools": [{"type": "function", "function": {"name": "get_weather"}}],
            "builtin_tools": ["rag_search"],
            "agent_tools": AGENT_TOOLS,
            "mcp_servers": MCP_SERVERS,
        }
    )
    console = Console(width=200, record=True)
    console.print(agents_table([agent]))
    assert (
        "get_weather, rag_search (built-in), ask_weather (agent), tools__* (MCP)"
        in console.export_text()
    )


def test_an_api_error_is_one_line_with_the_fields_it_names() -> None:
    refused = InvalidRequestError(
        400, "invalid_request", "the body is not valid", ["name: too long"]
    )
    assert error_line(refused, "http://x") == (
        "error: invalid_request: the body is not valid (name: too long)"
    )
    quoted = InvalidRequestError(
        400, "invalid_request", "max_steps: too big", ["max_steps: too big"]
    )
    assert error_line(quoted, "http://x") == "error: invalid_request: max_steps: too big"
    down = APIConnectionError("could not talk")
    down.__cause__ = httpx.ConnectError("[Errno 111] Connection refused")
    assert error_line(down, "http://x") == (
        "error: the Juru server at http://x cannot be reached ([Errno 111] Connection refused)"
    )


def test_tools_name_a_dict_of_functions() -> None:
    handlers = load_tool_handlers("tests.support.terminal_tools:TOOLS")
    call = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Medan"}')
    assert run_blocking(handlers["get_weather"], call) == (
        "Medan: 30°C, cerah (from the test handler)",
        False,
    )
    output, failed = run_blocking(
        handlers["get_weather"], call.model_copy(update={"arguments": "{}"})
    )
    assert failed and "TypeError" in output
    for target, message in [
        ("tests.support.terminal_tools", "must look like"),
        ("tests.support.no_such_module:TOOLS", "cannot import"),
        ("tests.support.terminal_tools:get_weather", "non-empty dict"),
    ]:
        with pytest.raises(ToolsLoadError, match=message):
            load_tool_handlers(target)
