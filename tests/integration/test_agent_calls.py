"""`/mcp` in process: the official MCP client over httpx's ASGI transport, the worker driven by
the test. Which agents `tools/list` offers when agents call agents, and a call whose run pauses
for a client tool all the same (the agent it calls gained one after the call started)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from httpx import ASGITransport, AsyncClient
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.support.hosted import WEATHER_TOOL, HostedHarness


@contextlib.asynccontextmanager
async def mcp_session(hosted: HostedHarness) -> AsyncIterator[ClientSession]:
    http = AsyncClient(
        transport=ASGITransport(app=hosted.app),
        base_url="http://juru.test",
        headers=hosted.headers,
        timeout=60,
    )
    async with (
        http,
        streamable_http_client("http://juru.test/mcp", http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def agent(hosted: HostedHarness, name: str, **fields: Any) -> str:
    created = await hosted.create_agent(**{"name": name, "tools": [], **fields})
    agent_id: str = created["id"]
    return agent_id


def calling(agent_id: str, name: str) -> list[dict[str, str]]:
    return [{"agent_id": agent_id, "name": name}]


async def listed(hosted: HostedHarness) -> list[str]:
    async with mcp_session(hosted) as session:
        return [tool.name for tool in (await session.list_tools()).tools]


async def test_agents_that_reach_client_tools_through_agent_tools_are_left_out(
    hosted: HostedHarness,
) -> None:
    weather = await agent(hosted, "Weather", tools=[WEATHER_TOOL])
    plain = await agent(hosted, "Plain")
    await agent(hosted, "Asks_weather", agent_tools=calling(weather, "ask_weather"))
    middle = await agent(hosted, "Middle", agent_tools=calling(plain, "ask_plain"))
    deep = await agent(hosted, "Deep", agent_tools=calling(middle, "ask_middle"))
    await agent(
        hosted,
        "Both",
        agent_tools=[*calling(plain, "ask_plain"), *calling(deep, "ask_deep")],
    )
    assert await listed(hosted) == ["Plain", "Middle", "Deep", "Both"]
    # Two levels down, an agent gains a client tool: every agent above it leaves the list.
    changed = await hosted.client.patch(f"/v1/agents/{plain}", json={"tools": [WEATHER_TOOL]})
    assert changed.status_code == 200, changed.text
    assert await listed(hosted) == []
    # A gone agent's tool is an error result when called, not a pause: its caller stays.
    await hosted.client.patch(f"/v1/agents/{plain}", json={"tools": []})
    await hosted.client.delete(f"/v1/agents/{plain}")
    assert await listed(hosted) == ["Middle", "Deep", "Both"]


async def test_a_call_that_pauses_for_a_client_tool_is_cancelled_with_the_reason(
    hosted: HostedHarness,
) -> None:
    weather = await agent(hosted, "Weather")
    await agent(hosted, "Desk", agent_tools=calling(weather, "ask_weather"))
    events = hosted.context.run_context().machine.events
    await events.wait_for_work(0)  # forget any earlier announcement
    async with mcp_session(hosted) as session:
        assert [tool.name for tool in (await session.list_tools()).tools] == ["Weather", "Desk"]
        reports: list[tuple[float, float | None, str | None]] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            reports.append((done, total, message))

        text = "What is the weather in Jakarta?"
        call = asyncio.create_task(
            session.call_tool("Desk", {"input": text}, progress_callback=progress)
        )
        await events.wait_for_work(60)  # the call's run is queued
        [queued] = (await hosted.client.get("/v1/runs")).json()["data"]
        assert queued["status"] == "queued"
        # Once the call has started, the agent it calls gains a client tool.
        changed = await hosted.client.patch(f"/v1/agents/{weather}", json={"tools": [WEATHER_TOOL]})
        assert changed.status_code == 200, changed.text
        await hosted.work()
        result = await call
    # Progress counts the call's own steps, not those of the child (copied into its log).
    assert reports == [(1, 20, "a step finished")]
    assert result.isError
    assert result.content[0].type == "text"
    assert result.content[0].text == (
        "the agent did not finish: the run paused for client tools (get_weather) that only "
        "the agent's own program can run, so it was cancelled"
    )
    summary = result.structuredContent
    assert summary is not None
    assert (summary["run_id"], summary["status"]) == (queued["id"], "cancelled")
    # The child run that asked for the tool is cancelled with it.
    [child] = (await hosted.client.get("/v1/runs", params={"parent_run_id": queued["id"]})).json()[
        "data"
    ]
    assert child["status"] == "cancelled"
