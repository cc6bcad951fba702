"""`/mcp` with the official MCP client against a real `juru serve`: the key's agents are its
tools, a call runs the agent to its answer with progress, another account sees only its own
agents, and a request without a key is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.e2e.test_hosted_runs import FAKE_MODEL, Api, FakeOpenAIProcess, juru_serve, until
from tests.support.hosted import WEATHER_TOOL
from tests.support.server import api_key, run_juru

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Server:
    base_url: str
    key: str
    other_key: str
    fake: FakeOpenAIProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("mcp")
    database_url = f"sqlite:///{folder}/juru.db"
    fake = FakeOpenAIProcess(folder / "fake_openai.log").start()
    try:
        with juru_serve(database_url, folder / "serve.log", **fake.env()) as serve:
            key = api_key(database_url)
            run_juru(database_url, "accounts", "create", "lain", "--balance", "1000")
            created = run_juru(database_url, "keys", "create", "--account", "lain")
            yield Server(serve.base_url, key, created.splitlines()[-1], fake)
    finally:
        fake.stop()


class Progress:
    def __init__(self) -> None:
        self.reports: list[tuple[float, float | None, str | None]] = []

    async def __call__(self, done: float, total: float | None, message: str | None) -> None:
        self.reports.append((done, total, message))


async def with_mcp(server: Server, key: str, work: Any) -> Any:
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=60) as http,
        streamable_http_client(f"{server.base_url}/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await work(session)


def test_an_mcp_client_calls_an_agent(server: Server) -> None:
    with Api(server.base_url, server.key) as api:
        translator = api.create_agent(
            name="Penerjemah Bahasa", model_id="juru/demo", system_prompt="Translate."
        )
        api.create_agent(name="Cuaca", model_id="juru/demo", tools=[WEATHER_TOOL])
    progress = Progress()

    async def work(session: ClientSession) -> tuple[list[str], CallToolResult, CallToolResult]:
        listed = await session.list_tools()
        names = [tool.name for tool in listed.tools]
        first = await session.call_tool(
            "Penerjemah_Bahasa", {"input": "Selamat pagi"}, progress_callback=progress
        )
        assert first.structuredContent is not None
        again = await session.call_tool(
            "Penerjemah_Bahasa",
            {"input": "Dan selamat malam", "thread_id": first.structuredContent["thread_id"]},
        )
        return names, first, again

    names, first, again = asyncio.run(with_mcp(server, server.key, work))
    assert "Penerjemah_Bahasa" in names
    assert "Cuaca" not in names  # a client tool: an MCP caller could not answer it
    assert not first.isError
    answer = first.content[0]
    assert answer.type == "text" and "Selamat pagi" in answer.text
    assert first.structuredContent is not None
    assert first.structuredContent["status"] == "succeeded"
    assert progress.reports and progress.reports[-1][0] == first.structuredContent["step_count"]
    assert not again.isError and again.structuredContent is not None
    thread_id = first.structuredContent["thread_id"]
    assert again.structuredContent["thread_id"] == thread_id
    with Api(server.base_url, server.key) as api:
        thread = api.http.get(f"/v1/threads/{thread_id}").json()
        messages = api.http.get(f"/v1/threads/{thread_id}/messages").json()["data"]
    assert thread["agent_id"] == translator["id"]
    assert [m["content"] for m in messages if m["role"] == "user"] == [
        "Selamat pagi",
        "Dan selamat malam",
    ]


def test_calls_that_cannot_run_are_error_results(server: Server) -> None:
    with Api(server.base_url, server.key) as api:
        api.create_agent(name="Gema", model_id="juru/demo")

    async def work(session: ClientSession) -> list[CallToolResult]:
        return [
            await session.call_tool("tidak_ada", {"input": "halo"}),
            await session.call_tool("Gema", {"input": 42}),
            await session.call_tool("Gema", {"input": "halo", "extra": 1}),
            await session.call_tool("Gema", {"input": "halo", "thread_id": "thr_000"}),
        ]

    results = asyncio.run(with_mcp(server, server.key, work))
    assert all(result.isError for result in results)
    texts = [result.content[0].text for result in results if result.content[0].type == "text"]
    assert texts[0].startswith("unknown_tool:")
    assert "input must be a string" in texts[1]
    assert "unknown arguments: extra" in texts[2]
    assert texts[3].startswith("not_found:")


def test_each_key_sees_its_own_agents_and_no_key_is_refused(server: Server) -> None:
    with Api(server.base_url, server.other_key) as api:
        api.create_agent(name="Milik_lain", model_id="juru/demo")

    async def names(session: ClientSession) -> list[str]:
        return [tool.name for tool in (await session.list_tools()).tools]

    mine = asyncio.run(with_mcp(server, server.key, names))
    theirs = asyncio.run(with_mcp(server, server.other_key, names))
    assert theirs == ["Milik_lain"]
    assert "Milik_lain" not in mine

    async def call_theirs(session: ClientSession) -> CallToolResult:
        return await session.call_tool("Milik_lain", {"input": "halo"})

    assert asyncio.run(with_mcp(server, server.key, call_theirs)).isError
    refused = httpx.post(
        f"{server.base_url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={"Accept": "application/json, text/event-stream"},
    )
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "missing_api_key"
    assert refused.headers["www-authenticate"] == "Bearer"


def test_a_caller_that_goes_away_cancels_its_run(server: Server) -> None:
    with Api(server.base_url, server.key) as api:
        agent = api.create_agent(name="Lambat", model_id=FAKE_MODEL)
    server.fake.script([{"content": "late", "delay": 60}])
    asked = len(server.fake.requests())

    async def call_and_leave(session: ClientSession) -> None:
        call = asyncio.ensure_future(session.call_tool("Lambat", {"input": "halo"}))
        await asyncio.to_thread(
            until, lambda: len(server.fake.requests()) > asked, "the model call"
        )
        call.cancel()  # the client gives up: the connection closes with the session

    asyncio.run(with_mcp(server, server.key, call_and_leave))
    with Api(server.base_url, server.key) as api:
        threads = api.http.get(f"/v1/agents/{agent['id']}/threads").json()["data"]
        runs_path = f"/v1/threads/{threads[0]['id']}/runs"

        def cancelled() -> list[dict[str, Any]]:
            runs: list[dict[str, Any]] = api.http.get(runs_path).json()["data"]
            return [run for run in runs if run["status"] == "cancelled"]

        assert len(until(cancelled, "the run cancelled")) == 1
