"""Agents' `mcp_servers`: the tools of real MCP servers (the SDK's FastMCP over Streamable HTTP
in a thread, an operator's stdio server, a server of the newest SDK) run inside hosted runs.

The end-to-end run is checked on both databases; what does not depend on the database runs on
SQLite only.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from juru.client import AsyncJuru
from juru.client.models import McpServer
from juru.settings import Settings
from juru.store.run_log import events_after
from juru.tools.mcp_toolbox import MAX_RESULT_CHARACTERS
from tests.integration.test_builtin_tools import call, harness_with, tool_results, transcript
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import HostedHarness, api_error
from tests.support.mcp_servers import (
    MCP2_PYTHON,
    REQUIRE_MCP2,
    STDIO_SCRIPT,
    ThreadedMcpServer,
    mcp2_server,
    refusing_port,
)

MODEL = "openai/gpt-4o-mini"
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
PUBLIC_ADDRESS = "93.184.215.14"
MASKED = {"X-Token": "***"}


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[ThreadedMcpServer]:
    with ThreadedMcpServer() as server:
        yield server


@contextlib.asynccontextmanager
async def mcp_harness(
    settings_factory: Callable[..., Settings],
    fake_openai: FakeOpenAIServer,
    allow_private: bool = True,
    **overrides: Any,
) -> AsyncIterator[HostedHarness]:
    async with harness_with(
        settings_factory,
        fake_openai,
        mcp_allow_private_networks=allow_private,
        mcp_timeout_seconds=10,
        **overrides,
    ) as hosted:
        yield hosted


async def run_with(
    hosted: HostedHarness, servers: list[dict[str, Any]], run_input: str = "go"
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    created = await hosted.create_agent(model_id=MODEL, tools=[], mcp_servers=servers)
    thread = await hosted.create_thread(created["id"])
    response = await hosted.start_run(thread["id"], run_input)
    assert response.status_code == 202, response.text
    await hosted.work()
    run = await hosted.get_run(response.json()["id"])
    return run, await transcript(hosted, thread["id"])


def offered_tools(fake_openai: FakeOpenAIServer, index: int = 0) -> list[str]:
    """The tool names the model was given in its `index`th request."""
    return [tool["function"]["name"] for tool in fake_openai.requests()[index].get("tools", [])]


async def test_an_agent_uses_its_mcp_servers_tool_and_the_record_names_the_server(
    settings_factory: Callable[..., Settings],
    fake_openai: FakeOpenAIServer,
    mcp_server: ThreadedMcpServer,
) -> None:
    fake_openai.script(
        [
            {"tool_calls": [call("tools__echo", text="halo"), call("tools__whoami")]},
            {"content": "Done."},
        ]
    )
    server = {
        "name": "tools",
        "url": mcp_server.url,
        "headers": {"X-Token": "s3cret"},
        "allowed_tools": ["echo", "whoami"],
    }
    async with mcp_harness(settings_factory, fake_openai) as hosted:
        listed_before = mcp_server.recorder.methods["tools/list"]
        called_before = mcp_server.recorder.methods["tools/call"]
        run, messages = await run_with(hosted, [server])
        assert run["status"] == "succeeded", run["error"]
        # Two model steps, one listing by Juru: the run keeps the server's tool list. (The
        # SDK's session also lists once in each call's session, to check structured output.)
        assert mcp_server.recorder.methods["tools/call"] == called_before + 2
        assert mcp_server.recorder.methods["tools/list"] == listed_before + 1 + 2
        # `allowed_tools` filters what the model is offered.
        assert sorted(offered_tools(fake_openai)) == ["tools__echo", "tools__whoami"]
        echo, whoami = tool_results(messages)
        assert (echo["name"], echo["content"]) == ("tools__echo", "echo: halo")
        assert (whoami["name"], whoami["content"]) == ("tools__whoami", "token=s3cret")
        [asked] = [m for m in messages if m["role"] == "assistant" and m["tool_calls"]]
        assert [c["name"] for c in asked["tool_calls"]] == ["tools__echo", "tools__whoami"]
        events = await events_after(hosted.context.engine, run["id"], 0)
        logged = [
            event.data
            for event in events
            if event.type == "message.completed" and event.data["role"] == "tool"
        ]
        assert [(m["name"], m["content"]) for m in logged] == [
            ("tools__echo", "echo: halo"),
            ("tools__whoami", "token=s3cret"),
        ]
        # The model saw the results under the same names.
        sent = fake_openai.requests()[1]["messages"]
        assert [m["content"] for m in sent if m["role"] == "tool"] == ["echo: halo", "token=s3cret"]


@SQLITE_ONLY
async def test_a_run_that_pauses_for_client_tools_keeps_its_tool_list(
    settings_factory: Callable[..., Settings],
    fake_openai: FakeOpenAIServer,
    mcp_server: ThreadedMcpServer,
) -> None:
    fake_openai.script(
        [
            {"tool_calls": [call("get_weather", city="Jakarta")]},
            {"tool_calls": [call("tools__echo", text="after the pause")]},
            {"content": "Done."},
        ]
    )
    server = {"name": "tools", "url": mcp_server.url, "allowed_tools": ["echo"]}
    async with mcp_harness(settings_factory, fake_openai) as hosted:
        created = await hosted.create_agent(model_id=MODEL, mcp_servers=[server])
        thread = await hosted.create_thread(created["id"])
        listed_before = mcp_server.recorder.methods["tools/list"]
        started = await hosted.start_run(thread["id"], "go")
        await hosted.work()
        paused = await hosted.get_run(started.json()["id"])
        assert paused["status"] == "requires_action"
        assert (await hosted.answer(paused)).status_code == 200
        await hosted.work()  # a second execution of the run
        done = await hosted.get_run(paused["id"])
        assert done["status"] == "succeeded", done["error"]
        # One listing by Juru for the whole run (and one in the call's own session).
        assert mcp_server.recorder.methods["tools/list"] == listed_before + 1 + 1
        assert "tools__echo" in offered_tools(fake_openai, 1)


@SQLITE_ONLY
async def test_header_values_are_masked_and_the_mask_keeps_the_stored_value(
    settings_factory: Callable[..., Settings],
    fake_openai: FakeOpenAIServer,
    mcp_server: ThreadedMcpServer,
) -> None:
    server = {"name": "tools", "url": mcp_server.url, "headers": {"X-Token": "s3cret"}}
    async with mcp_harness(settings_factory, fake_openai) as hosted:
        agent = await hosted.create_agent(model_id=MODEL, tools=[], mcp_servers=[server])
        assert agent["mcp_servers"] == [{**server, "headers": {"X-Token": "***"}}]
        fetched = (await hosted.client.get(f"/v1/agents/{agent['id']}")).text
        listed = (await hosted.client.get("/v1/agents")).text
        assert "s3cret" not in fetched and "s3cret" not in listed
        # An update that sends the masked server back keeps the stored value.
        patch = {"mcp_servers": agent["mcp_servers"], "name": "renamed"}
        updated = await hosted.client.patch(f"/v1/agents/{agent['id']}", json=patch)
        assert updated.status_code == 200, updated.text
        fake_openai.script([{"tool_calls": [call("tools__whoami")]}, {"content": "ok"}])
        thread = await hosted.create_thread(agent["id"])
        started = await hosted.start_run(thread["id"], "who")
        await hosted.work()
        run = await hosted.get_run(started.json()["id"])
        [result] = tool_results(await transcript(hosted, thread["id"]))
        assert run["status"] == "succeeded" and result["content"] == "token=s3cret"
        # The mask of a header that was never stored is refused, naming the field; so is the
        # mask sent with another url (the secret would go where it was not given for).
        for changed, path in [
            ({"headers": {"X-Other": "***"}}, "mcp_servers.0.headers.X-Other"),
            ({"url": mcp_server.url + "/elsewhere"}, "mcp_servers.0.headers.X-Token"),
        ]:
            body = {"mcp_servers": [{**agent["mcp_servers"][0], **changed}]}
            refused = await hosted.client.patch(f"/v1/agents/{agent['id']}", json=body)
            api_error(refused, 400, "invalid_request")
            assert refused.json()["error"]["fields"][0]["path"] == path


@SQLITE_ONLY
async def test_the_async_client_creates_and_updates_an_agents_mcp_servers(
    settings_factory: Callable[..., Settings],
    fake_openai: FakeOpenAIServer,
    mcp_server: ThreadedMcpServer,
) -> None:
    server = {"name": "tools", "url": mcp_server.url, "headers": {"X-Token": "s3cret"}}
    async with mcp_harness(settings_factory, fake_openai) as hosted, AsyncJuru() as juru:
        await juru.http.aclose()
        juru.http = hosted.client  # the app in process, with the harness's key
        agent = await juru.agents.create("Tools", MODEL, mcp_servers=[server])
        assert agent.mcp_servers == [McpServer(name="tools", url=mcp_server.url, headers=MASKED)]
        # The masked server sent back keeps the stored header; the tool list is narrowed.
        kept = {**agent.mcp_servers[0].model_dump(exclude_none=True), "allowed_tools": ["echo"]}
        updated = await juru.agents.update(agent.id, mcp_servers=[kept])
        assert updated.mcp_servers[0].allowed_tools == ["echo"]
        fake_openai.script([{"content": "ok"}])
        thread = await juru.threads.create(agent.id)
        run = await juru.runs.create(thread.id, "go")
        await hosted.work()
        assert (await juru.runs.get(run.id)).status == "succeeded"
        assert offered_tools(fake_openai) == ["tools__echo"]
        cleared = await juru.agents.update(agent.id, mcp_servers=[])
        assert cleared.mcp_servers == []


@SQLITE_ONLY
async def test_a_server_going_down_mid_run_is_an_error_result_and_the_run_succeeds(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {"tool_calls": [call("flaky__go_down")]},
            {"tool_calls": [call("flaky__echo", text="still there?")]},
            {"content": "The server went away."},
        ]
    )
    with ThreadedMcpServer() as flaky, refusing_port() as port:
        # A server that refuses connections from the start only adds no tools.
        servers = [
            {"name": "flaky", "url": flaky.url},
            {"name": "gone", "url": f"http://127.0.0.1:{port}/mcp"},
        ]
        async with mcp_harness(settings_factory, fake_openai) as hosted:
            run, messages = await run_with(hosted, servers)
    assert run["status"] == "succeeded", run["error"]
    assert run["output"] == "The server went away."
    assert sorted(offered_tools(fake_openai))[:2] == ["flaky__add", "flaky__big"]
    assert not [name for name in offered_tools(fake_openai) if name.startswith("gone")]
    went, lost = tool_results(messages)
    assert went["content"] == "going down"
    assert lost["name"] == "flaky__echo"
    assert lost["content"].startswith("Error: the call to MCP server 'flaky' failed"), lost
    assert "ConnectError" in lost["content"], lost


@SQLITE_ONLY
async def test_a_tool_error_and_a_long_result_reach_the_model_as_results(
    settings_factory: Callable[..., Settings],
    fake_openai: FakeOpenAIServer,
    mcp_server: ThreadedMcpServer,
) -> None:
    fake_openai.script(
        [
            {"tool_calls": [call("t__fail", reason="bad input"), call("t__big")]},
            {"tool_calls": [call("t__add", a=1, b=2)] * 2 + [call("t__echo", text="a")] * 2},
            {"content": "ok"},
        ]
    )
    async with mcp_harness(settings_factory, fake_openai) as hosted:
        run, messages = await run_with(hosted, [{"name": "t", "url": mcp_server.url}])
    assert run["status"] == "succeeded", run["error"]
    failed, big, *capped = tool_results(messages)
    assert failed["content"].startswith("Error: the MCP tool reported an error"), failed
    assert "failing on purpose: bad input" in failed["content"]
    assert len(big["content"]) < MAX_RESULT_CHARACTERS + 200
    assert big["content"].startswith("x" * MAX_RESULT_CHARACTERS)
    assert "[truncated: the result had 50000 characters" in big["content"]
    # The built-in per-turn cap (3) counts MCP calls too.
    assert [m["content"] for m in capped[:3]] == ["3", "3", "echo: a"]
    assert "at most 3 built-in tool calls" in capped[3]["content"]


@SQLITE_ONLY
async def test_private_addresses_are_refused_when_saved_and_when_called(
    settings_factory: Callable[..., Settings],
    fake_openai: FakeOpenAIServer,
    mcp_server: ThreadedMcpServer,
) -> None:
    async with mcp_harness(settings_factory, fake_openai, allow_private=False) as hosted:
        public = {"name": "public", "url": f"https://{PUBLIC_ADDRESS}/mcp"}
        for url, problem in [
            (mcp_server.url, "a loopback address"),
            ("http://10.1.2.3/mcp", "a private address"),
            ("http://[fe80::1]/mcp", "a link-local address"),
            ("http://localhost/mcp", "a loopback address"),
        ]:
            servers = [public, {"name": "x", "url": url}]
            body = {"name": "a", "model_id": MODEL, "mcp_servers": servers}
            refused = await hosted.client.post("/v1/agents", json=body)
            message = api_error(refused, 400, "invalid_request")
            assert refused.json()["error"]["fields"] == [
                {"path": "mcp_servers.1.url", "reason": message.split(": ", 1)[1]}
            ]
            assert problem in message, message

        # A name that resolves to a public address is accepted; when it later resolves to
        # loopback, the call is refused before connecting.
        answers = {"mcp.example.test": [PUBLIC_ADDRESS]}

        async def resolve(host: str, port: int) -> list[str]:
            return answers[host]

        hosted.context.mcp.network.resolve = resolve
        url = f"http://mcp.example.test:{mcp_server.port}/mcp"
        agent = await hosted.create_agent(
            model_id=MODEL, tools=[], mcp_servers=[{"name": "moved", "url": url}]
        )
        answers["mcp.example.test"] = ["127.0.0.1"]
        fake_openai.script([{"content": "no tools"}])
        thread = await hosted.create_thread(agent["id"])
        started = await hosted.start_run(thread["id"], "hi")
        await hosted.work()
        run = await hosted.get_run(started.json()["id"])
    assert run["status"] == "succeeded", run["error"]
    assert offered_tools(fake_openai) == []  # listing the tools was refused: none offered


@SQLITE_ONLY
async def test_each_call_checks_the_address_again(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer
) -> None:
    """The tools are listed while private addresses are allowed; the server's own tool then
    takes that back (as an operator's restart would), and the next call is refused."""

    async with mcp_harness(settings_factory, fake_openai) as hosted:
        network = hosted.context.mcp.network

        def forbid_private() -> None:
            network.allow_private = False

        fake_openai.script(
            [
                {"tool_calls": [call("m__trigger")]},
                {"tool_calls": [call("m__echo", text="x")]},
                {"content": "ok"},
            ]
        )
        with ThreadedMcpServer(on_trigger=forbid_private) as server:
            url = f"http://localhost:{server.port}/mcp"
            run, messages = await run_with(hosted, [{"name": "m", "url": url}])
    assert run["status"] == "succeeded", run["error"]
    triggered, refused = tool_results(messages)
    assert triggered["content"] == "triggered"
    assert refused["content"].startswith("Error: the call to MCP server 'm' failed"), refused
    assert "a loopback address; MCP servers of agents must be on public" in refused["content"]


@SQLITE_ONLY
async def test_an_operator_stdio_server_is_used_by_name_only(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer, tmp_path: Path
) -> None:
    config = tmp_path / "mcp.toml"
    config.write_text(
        "[servers.notes]\n"
        f"command = {json.dumps(sys.executable)}\n"
        f"args = [{json.dumps(str(STDIO_SCRIPT))}]\n"
        'env = { NOTES_GREETING = "selamat pagi" }\n'
        'allowed_tools = ["read_note"]\n'
    )
    fake_openai.script(
        [
            {"tool_calls": [call("notes__read_note", title="todo"), call("notes__delete_note")]},
            {"content": "read"},
        ]
    )
    async with mcp_harness(
        settings_factory, fake_openai, allow_private=False, mcp_servers=config
    ) as hosted:
        run, messages = await run_with(hosted, [{"name": "notes"}])
        assert offered_tools(fake_openai) == ["notes__read_note"]
        read, deleted = tool_results(messages)
        assert read["content"] == "note todo: selamat pagi"
        assert deleted["content"].startswith("Error: this agent has no tool named"), deleted
        assert run["status"] == "succeeded", run["error"]
        # A user cannot point the operator's name elsewhere, nor name an unknown server alone.
        for servers, path in [
            ([{"name": "notes", "url": f"https://{PUBLIC_ADDRESS}/mcp"}], "mcp_servers.0.name"),
            ([{"name": "nope"}], "mcp_servers.0.url"),
            ([{"name": "notes", "headers": {"A": "b"}}], "mcp_servers.0.headers"),
        ]:
            body = {"name": "a", "model_id": MODEL, "mcp_servers": servers}
            refused = await hosted.client.post("/v1/agents", json=body)
            api_error(refused, 400, "invalid_request")
            assert refused.json()["error"]["fields"][0]["path"] == path
        # ... and can never give a command.
        body = {"name": "a", "model_id": MODEL, "mcp_servers": [{"name": "x", "command": "sh"}]}
        refused = await hosted.client.post("/v1/agents", json=body)
        api_error(refused, 400, "invalid_request")
        assert refused.json()["error"]["fields"][0]["path"] == "mcp_servers.0.command"


@SQLITE_ONLY
async def test_a_server_built_with_the_newest_sdk_serves_an_agent(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer
) -> None:
    if not MCP2_PYTHON.exists():
        note = "no .venv-mcp2 (scripts/test makes it): the MCP 2.x server test cannot run"
        if REQUIRE_MCP2:
            pytest.fail(f"{note} (JURU_REQUIRE_MCP2=1)")
        pytest.skip(note)
    fake_openai.script([{"tool_calls": [call("new__shout", text="halo")]}, {"content": "ok"}])
    with mcp2_server() as url:
        async with mcp_harness(settings_factory, fake_openai) as hosted:
            run, messages = await run_with(hosted, [{"name": "new", "url": url}])
    assert run["status"] == "succeeded", run["error"]
    [result] = tool_results(messages)
    assert result["content"] == "HALO (from an MCP 2.x server)"
