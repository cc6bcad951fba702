"""The Hosted Agents API (`/v1`) over a real database: agents, validation, threads, runs,
pagination, transcripts and tenant isolation. Runs are executed step by step with the
harness's test worker (`hosted.work()`); the demo model calls `get_weather` for the default
input and answers with the tool's output."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from httpx import Response
from sqlalchemy import Table, func, select

from juru.engine.execution import hosted_thread_key
from juru.store.tables import (
    agents,
    document_chunks,
    documents,
    files,
    runs,
    thread_messages,
    threads,
)
from tests.support.hosted import (
    AGENT_FIELDS,
    RUN_FIELDS,
    WEATHER_TOOL,
    HostedHarness,
    api_error,
    demo_answer,
)

# --- shapes -------------------------------------------------------------------------------

THREAD_FIELDS = {"id", "agent_id", "title", "metadata", "created_at"}
MESSAGE_FIELDS = {
    "id",
    "thread_id",
    "run_id",
    "role",
    "content",
    "tool_calls",
    "tool_call_id",
    "name",
    "created_at",
}
LIST_FIELDS = {"object", "data", "has_more", "next_cursor"}
WEATHER_QUESTION = "What is the weather in Jakarta?"
WEATHER_OUTPUT = "Sunny, 31 C in Jakarta"

# --- helpers ------------------------------------------------------------------------------


def function_tool(name: str, **function: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, **function}}


def ok(response: Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def create_agent_response(hosted: HostedHarness, **fields: Any) -> Response:
    body = {"name": "Weather", "model_id": "juru/demo", **fields}
    return await hosted.client.post("/v1/agents", json=body)


async def get_json(hosted: HostedHarness, path: str) -> Any:
    return ok(await hosted.client.get(path))


async def walk_pages(hosted: HostedHarness, path: str, limit: int) -> list[list[dict[str, Any]]]:
    """Every page of a list, following `next_cursor`, checking each page's envelope."""
    pages: list[list[dict[str, Any]]] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit}
        if after is not None:
            params["after"] = after
        page = ok(await hosted.client.get(path, params=params))
        assert set(page) == LIST_FIELDS and page["object"] == "list"
        pages.append(page["data"])
        if not page["has_more"]:
            assert page["next_cursor"] is None
            return pages
        assert len(page["data"]) == limit
        assert page["next_cursor"] == page["data"][-1]["id"]
        after = page["next_cursor"]
        assert len(pages) < 50, "pagination does not end"


async def checkpoints(hosted: HostedHarness, thread_id: str) -> list[Any]:
    config = {"configurable": {"thread_id": hosted_thread_key(thread_id)}}
    return [item async for item in hosted.context.checkpointer.alist(config)]


async def count_rows(hosted: HostedHarness, table: Table, thread_id: str) -> int:
    column = table.c.id if table is threads else table.c.thread_id
    async with hosted.context.engine.connect() as connection:
        count = await connection.scalar(
            select(func.count()).select_from(table).where(column == thread_id)
        )
    return int(count or 0)


async def paused_run(
    hosted: HostedHarness, thread_id: str, run_input: Any = WEATHER_QUESTION
) -> dict[str, Any]:
    """A weather run on the thread, executed up to its tool call (requires_action)."""
    run = ok(await hosted.start_run(thread_id, run_input), 202)
    await hosted.work()
    paused = await hosted.get_run(run["id"])
    assert paused["status"] == "requires_action", paused
    return paused


async def finished_run(
    hosted: HostedHarness, thread_id: str, run_input: Any = WEATHER_QUESTION
) -> dict[str, Any]:
    """A weather run on the thread, through its tool round trip to succeeded."""
    paused = await paused_run(hosted, thread_id, run_input)
    ok(await hosted.answer(paused, WEATHER_OUTPUT))
    await hosted.work()
    done = await hosted.get_run(paused["id"])
    assert done["status"] == "succeeded", done
    return done


# --- 1. agents ----------------------------------------------------------------------------


class TestAgents:
    async def test_create_returns_exactly_the_documented_fields_with_defaults(
        self, hosted: HostedHarness
    ) -> None:
        agent = ok(await create_agent_response(hosted), 201)
        assert set(agent) == AGENT_FIELDS
        assert re.fullmatch(r"agt_[0-9a-f]{24}", agent["id"])
        assert agent["name"] == "Weather" and agent["model_id"] == "juru/demo"
        assert agent["system_prompt"] == ""
        assert agent["tools"] == [] and agent["builtin_tools"] == []
        assert agent["max_steps"] == 20
        assert agent["created_at"] == agent["updated_at"]
        assert agent["created_at"].startswith("2026-01-01T00:00:00")

    async def test_create_keeps_every_given_field_and_get_returns_it(
        self, hosted: HostedHarness
    ) -> None:
        fields = {
            "name": "Cuaca",
            "system_prompt": "Answer briefly.",
            "tools": [WEATHER_TOOL],
            "builtin_tools": ["rag_search"],
            "max_steps": 7,
        }
        agent = ok(await create_agent_response(hosted, **fields), 201)
        assert {name: agent[name] for name in fields} == fields
        assert await get_json(hosted, f"/v1/agents/{agent['id']}") == agent

    async def test_get_unknown_agent_is_404(self, hosted: HostedHarness) -> None:
        message = api_error(await hosted.client.get("/v1/agents/agt_missing"), 404, "not_found")
        assert "agt_missing" in message

    async def test_patch_changes_the_given_fields_and_updated_at(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        hosted.clock.advance(60)
        changes = {
            "name": "Renamed",
            "system_prompt": "Be kind.",
            "max_steps": 3,
            "builtin_tools": ["text_to_speech"],
        }
        patched = ok(await hosted.client.patch(f"/v1/agents/{agent['id']}", json=changes))
        assert set(patched) == AGENT_FIELDS
        assert {name: patched[name] for name in changes} == changes
        assert patched["tools"] == agent["tools"] and patched["model_id"] == agent["model_id"]
        assert patched["created_at"] == agent["created_at"]
        assert patched["updated_at"] != agent["updated_at"]
        assert patched["updated_at"].startswith("2026-01-01T00:01:00")
        assert await get_json(hosted, f"/v1/agents/{agent['id']}") == patched

    async def test_patch_is_validated_and_a_rejected_patch_changes_nothing(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        path = f"/v1/agents/{agent['id']}"
        hosted.clock.advance(60)
        message = api_error(
            await hosted.client.patch(path, json={"model_id": "nope/model"}),
            400,
            "unsupported_model",
        )
        assert "nope/model" in message
        message = api_error(
            await hosted.client.patch(path, json={"model_id": "openai/gpt-5.6"}),
            400,
            "unsupported_model",
        )
        assert "openai/gpt-5.6" in message
        for field in ("name", "model_id", "system_prompt", "tools", "builtin_tools", "max_steps"):
            response = await hosted.client.patch(path, json={field: None})
            assert field in api_error(response, 400, "invalid_request")
        message = api_error(
            await hosted.client.patch(path, json={"max_steps": 41}), 400, "invalid_request"
        )
        assert "max_steps" in message
        message = api_error(
            await hosted.client.patch(path, json={"colour": "red"}), 400, "invalid_request"
        )
        assert "colour" in message
        # The patch is checked against the agent as it would become: its tools and builtins.
        message = api_error(
            await hosted.client.patch(
                path, json={"tools": [function_tool("rag_search")], "builtin_tools": ["rag_search"]}
            ),
            400,
            "invalid_request",
        )
        assert "rag_search" in message
        clash = await hosted.create_agent(tools=[function_tool("rag_search")])
        message = api_error(
            await hosted.client.patch(
                f"/v1/agents/{clash['id']}", json={"builtin_tools": ["rag_search"]}
            ),
            400,
            "invalid_request",
        )
        assert "rag_search" in message
        assert await get_json(hosted, path) == agent
        missing = await hosted.client.patch("/v1/agents/agt_missing", json={"name": "x"})
        api_error(missing, 404, "not_found")

    async def test_delete_removes_threads_runs_transcripts_and_checkpoints(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        kept = await hosted.create_agent(name="Kept")
        thread = await hosted.create_thread(agent["id"])
        kept_thread = await hosted.create_thread(kept["id"])
        run = await finished_run(hosted, thread["id"])
        kept_run = await finished_run(hosted, kept_thread["id"])
        assert await checkpoints(hosted, thread["id"])
        assert await count_rows(hosted, thread_messages, thread["id"]) == 4

        response = await hosted.client.delete(f"/v1/agents/{agent['id']}")
        assert ok(response) == {"id": agent["id"], "deleted": True}

        api_error(await hosted.client.get(f"/v1/agents/{agent['id']}"), 404, "not_found")
        api_error(await hosted.client.get(f"/v1/threads/{thread['id']}"), 404, "not_found")
        api_error(await hosted.client.get(f"/v1/runs/{run['id']}"), 404, "not_found")
        messages = await hosted.client.get(f"/v1/threads/{thread['id']}/messages")
        api_error(messages, 404, "not_found")
        for table in (threads, runs, thread_messages):
            assert await count_rows(hosted, table, thread["id"]) == 0, table.name
        assert await checkpoints(hosted, thread["id"]) == []
        again = await hosted.client.delete(f"/v1/agents/{agent['id']}")
        api_error(again, 404, "not_found")

        # The other agent keeps everything.
        assert await get_json(hosted, f"/v1/agents/{kept['id']}") == kept
        assert await hosted.get_run(kept_run["id"]) == kept_run
        assert await checkpoints(hosted, kept_thread["id"])
        assert await count_rows(hosted, thread_messages, kept_thread["id"]) == 4
        listed = await get_json(hosted, "/v1/agents")
        assert [item["id"] for item in listed["data"]] == [kept["id"]]


# --- 2. agent validation ------------------------------------------------------------------

MANY_TOOLS = [function_tool(f"tool_{index}") for index in range(65)]
INVALID_AGENTS: list[Any] = [
    pytest.param({"max_steps": 0}, "invalid_request", "max_steps", id="max_steps-0"),
    pytest.param({"max_steps": 41}, "invalid_request", "max_steps", id="max_steps-41"),
    pytest.param({"max_steps": "many"}, "invalid_request", "max_steps", id="max_steps-text"),
    pytest.param({"tools": MANY_TOOLS}, "invalid_request", ("tools", "64"), id="65-tools"),
    pytest.param(
        {"tools": [{"type": "retrieval", "function": {"name": "find"}}]},
        "invalid_request",
        "tools.0.type",
        id="tool-type-not-function",
    ),
    pytest.param(
        {"tools": [{"function": {"name": "find"}}]},
        "invalid_request",
        "tools.0.type",
        id="tool-without-type",
    ),
    pytest.param(
        {"tools": [{"type": "function", "function": {"description": "no name"}}]},
        "invalid_request",
        "tools.0.function.name",
        id="tool-without-name",
    ),
    pytest.param(
        {"tools": [{"type": "function"}]},
        "invalid_request",
        "tools.0.function",
        id="tool-without-function",
    ),
    pytest.param(
        {"tools": [function_tool("get weather")]},
        "invalid_request",
        "tools.0.function.name",
        id="tool-name-with-space",
    ),
    pytest.param(
        {"tools": [function_tool("t" * 65)]},
        "invalid_request",
        "tools.0.function.name",
        id="tool-name-65-chars",
    ),
    pytest.param(
        {"tools": [function_tool("")]},
        "invalid_request",
        "tools.0.function.name",
        id="tool-name-empty",
    ),
    pytest.param(
        {"tools": [WEATHER_TOOL, function_tool("lookup"), function_tool("get_weather")]},
        "invalid_request",
        "get_weather",
        id="duplicate-tool-names",
    ),
    pytest.param(
        {"model_id": "acme/unknown-1"}, "unsupported_model", "acme/unknown-1", id="unknown-model"
    ),
    pytest.param(
        {"model_id": "openai/gpt-5.6"}, "unsupported_model", "openai/gpt-5.6", id="not-agentic"
    ),
    pytest.param(
        {"builtin_tools": ["web_search"]},
        "builtin_tool_unavailable",
        "web_search",
        id="web_search",
    ),
    pytest.param(
        {"builtin_tools": ["rag_search", "generate_image"]},
        "builtin_tool_unavailable",
        "generate_image",
        id="generate_image",
    ),
    pytest.param(
        {"builtin_tools": ["teleport"]}, "invalid_request", "teleport", id="unknown-builtin"
    ),
    pytest.param(
        {"builtin_tools": ["rag_search", "rag_search"]},
        "invalid_request",
        "builtin_tools",
        id="builtin-twice",
    ),
    pytest.param(
        {"tools": [function_tool("text_to_speech")], "builtin_tools": ["text_to_speech"]},
        "invalid_request",
        "text_to_speech",
        id="client-tool-named-like-builtin",
    ),
    pytest.param({"colour": "red"}, "invalid_request", "colour", id="unknown-field"),
    pytest.param({"name": ""}, "invalid_request", "name", id="empty-name"),
]


class TestAgentValidation:
    @pytest.mark.parametrize(("fields", "code", "named"), INVALID_AGENTS)
    async def test_invalid_agent_is_a_400_naming_the_problem(
        self, hosted: HostedHarness, fields: dict[str, Any], code: str, named: str | tuple[str, ...]
    ) -> None:
        message = api_error(await create_agent_response(hosted, **fields), 400, code)
        for fragment in (named,) if isinstance(named, str) else named:
            assert fragment in message
        assert (await get_json(hosted, "/v1/agents"))["data"] == []

    async def test_missing_required_fields(self, hosted: HostedHarness) -> None:
        response = await hosted.client.post("/v1/agents", json={"name": "No model"})
        assert "model_id" in api_error(response, 400, "invalid_request")
        response = await hosted.client.post("/v1/agents", json={"model_id": "juru/demo"})
        assert "name" in api_error(response, 400, "invalid_request")

    async def test_malformed_json_is_a_400(self, hosted: HostedHarness) -> None:
        response = await hosted.client.post(
            "/v1/agents",
            content=b'{"name": "Weather", "model_id": ',
            headers={"content-type": "application/json"},
        )
        message = api_error(response, 400, "invalid_json")
        assert "JSON" in message and "line 1 column 33" in message
        response = await hosted.client.post(
            "/v1/agents", content=b"[1, 2]", headers={"content-type": "application/json"}
        )
        api_error(response, 400, "invalid_request")
        assert (await get_json(hosted, "/v1/agents"))["data"] == []

    async def test_the_limits_themselves_are_accepted(self, hosted: HostedHarness) -> None:
        for steps in (1, 40):
            agent = ok(await create_agent_response(hosted, max_steps=steps), 201)
            assert agent["max_steps"] == steps
        tools = MANY_TOOLS[:64]
        agent = ok(await create_agent_response(hosted, tools=tools), 201)
        assert [tool["function"]["name"] for tool in agent["tools"]] == [
            f"tool_{index}" for index in range(64)
        ]
        longest = function_tool("T-" + "x" * 62)
        assert ok(await create_agent_response(hosted, tools=[longest]), 201)["tools"] == [longest]

    async def test_live_builtin_tools_are_accepted(self, hosted: HostedHarness) -> None:
        for builtins in (["text_to_speech"], ["rag_search"], ["text_to_speech", "rag_search"]):
            agent = ok(await create_agent_response(hosted, builtin_tools=builtins), 201)
            assert agent["builtin_tools"] == builtins

    async def test_a_tool_keeps_its_description_and_parameters(self, hosted: HostedHarness) -> None:
        agent = ok(await create_agent_response(hosted, tools=[WEATHER_TOOL]), 201)
        assert agent["tools"] == [WEATHER_TOOL]


# --- 3. threads ---------------------------------------------------------------------------


class TestThreads:
    async def test_create_with_an_empty_body_without_a_body_and_with_fields(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        path = f"/v1/agents/{agent['id']}/threads"
        empty = ok(await hosted.client.post(path, json={}), 201)
        bodiless = ok(await hosted.client.post(path), 201)
        metadata = {"customer": "c-42", "tags": ["vip"], "score": 3}
        full = ok(await hosted.client.post(path, json={"title": "Trip", "metadata": metadata}), 201)
        for thread in (empty, bodiless, full):
            assert set(thread) == THREAD_FIELDS
            assert re.fullmatch(r"thr_[0-9a-f]{24}", thread["id"])
            assert thread["agent_id"] == agent["id"]
            assert thread["created_at"].startswith("2026-01-01T00:00:00")
        assert empty["title"] is None and empty["metadata"] is None
        assert bodiless["title"] is None and bodiless["metadata"] is None
        assert full["title"] == "Trip" and full["metadata"] == metadata
        assert len({empty["id"], bodiless["id"], full["id"]}) == 3
        for thread in (empty, bodiless, full):
            assert await get_json(hosted, f"/v1/threads/{thread['id']}") == thread

    async def test_invalid_thread_bodies(self, hosted: HostedHarness) -> None:
        agent = await hosted.create_agent()
        path = f"/v1/agents/{agent['id']}/threads"
        response = await hosted.client.post(path, json={"topic": "x"})
        assert "topic" in api_error(response, 400, "invalid_request")
        response = await hosted.client.post(path, json={"metadata": "not an object"})
        assert "metadata" in api_error(response, 400, "invalid_request")
        response = await hosted.client.post(path, json={"title": "t" * 501})
        assert "title" in api_error(response, 400, "invalid_request")
        assert (await get_json(hosted, path))["data"] == []

    async def test_unknown_agent_or_thread_is_404(self, hosted: HostedHarness) -> None:
        for response in (
            await hosted.client.post("/v1/agents/agt_missing/threads", json={}),
            await hosted.client.get("/v1/agents/agt_missing/threads"),
        ):
            assert "agt_missing" in api_error(response, 404, "not_found")
        response = await hosted.client.get("/v1/threads/thr_missing")
        assert "thr_missing" in api_error(response, 404, "not_found")

    async def test_threads_are_listed_per_agent_newest_first(self, hosted: HostedHarness) -> None:
        first, second = await hosted.create_agent(), await hosted.create_agent()
        mine = [await hosted.create_thread(first["id"]) for _ in range(3)]
        theirs = await hosted.create_thread(second["id"])
        listed = await get_json(hosted, f"/v1/agents/{first['id']}/threads")
        assert set(listed) == LIST_FIELDS
        assert listed["data"] == mine[::-1]
        assert listed["has_more"] is False and listed["next_cursor"] is None
        other = await get_json(hosted, f"/v1/agents/{second['id']}/threads")
        assert other["data"] == [theirs]
        pages = await walk_pages(hosted, f"/v1/agents/{first['id']}/threads", 2)
        assert [item["id"] for page in pages for item in page] == [t["id"] for t in mine[::-1]]


# --- 4. runs ------------------------------------------------------------------------------


class TestRuns:
    async def test_a_new_run_is_queued_with_the_documented_view(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent(max_steps=7)
        thread = await hosted.create_thread(agent["id"])
        hosted.clock.advance(5)
        run = ok(await hosted.start_run(thread["id"]), 202)
        assert set(run) == RUN_FIELDS  # no `output` before the run succeeded
        assert re.fullmatch(r"run_[0-9a-f]{24}", run["id"])
        assert run["thread_id"] == thread["id"] and run["agent_id"] == agent["id"]
        assert run["status"] == "queued" and run["step_count"] == 0
        assert run["max_steps"] == 7
        assert run["cost_rupiah"] == 0
        assert run["pending_tool_calls"] is None and run["error"] is None
        assert run["created_at"] == run["updated_at"]
        assert run["created_at"].startswith("2026-01-01T00:00:05")
        assert await hosted.get_run(run["id"]) == run

    async def test_output_appears_only_once_the_run_succeeded(self, hosted: HostedHarness) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        paused = await paused_run(hosted, thread["id"])
        assert set(paused) == RUN_FIELDS
        [call] = paused["pending_tool_calls"]
        assert call["name"] == "get_weather"
        assert json.loads(call["arguments"]) == {"city": "Jakarta"}
        ok(await hosted.answer(paused, WEATHER_OUTPUT))
        await hosted.work()
        done = await hosted.get_run(paused["id"])
        assert set(done) == {*RUN_FIELDS, "output"}
        assert done["status"] == "succeeded"
        assert done["output"] == demo_answer("get_weather", WEATHER_OUTPUT)
        assert done["pending_tool_calls"] is None and done["error"] is None

    async def test_input_as_a_string_or_as_messages(self, hosted: HostedHarness) -> None:
        agent = await hosted.create_agent(tools=[])
        thread = await hosted.create_thread(agent["id"])
        as_text = ok(await hosted.start_run(thread["id"], "hello there"), 202)
        await hosted.work()
        assert (await hosted.get_run(as_text["id"]))["status"] == "succeeded"
        conversation = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "My name is Ana."},
            {"role": "assistant", "content": "Hello Ana."},
            {"role": "user", "content": "What is my name?"},
        ]
        as_messages = ok(await hosted.start_run(thread["id"], conversation), 202)
        await hosted.work()
        done = await hosted.get_run(as_messages["id"])
        assert done["status"] == "succeeded" and "Your name is Ana." in done["output"]

    @pytest.mark.parametrize(
        ("run_input", "named"),
        [
            pytest.param("", "input", id="empty-string"),
            pytest.param("  \n\t ", "input", id="whitespace"),
            pytest.param([], "input", id="empty-array"),
            pytest.param([{"role": "tool", "content": "x"}], "role", id="bad-role"),
            pytest.param([{"role": "user"}], "content", id="no-content"),
            pytest.param([{"role": "user", "content": "hi", "x": 1}], "x", id="extra-key"),
            pytest.param(42, "input", id="number"),
            pytest.param(None, "input", id="null"),
        ],
    )
    async def test_invalid_input_is_a_400(
        self, hosted: HostedHarness, run_input: Any, named: str
    ) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        message = api_error(await hosted.start_run(thread["id"], run_input), 400, "invalid_request")
        assert named in message
        assert (await get_json(hosted, f"/v1/threads/{thread['id']}/runs"))["data"] == []

    async def test_run_body_must_have_only_input(self, hosted: HostedHarness) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        path = f"/v1/threads/{thread['id']}/runs"
        response = await hosted.client.post(path, json={})
        assert "input" in api_error(response, 400, "invalid_request")
        response = await hosted.client.post(path, json={"input": "hi", "model": "x"})
        assert "model" in api_error(response, 400, "invalid_request")
        response = await hosted.client.post(path, json={"input": "hi", "stream": "yes"})
        assert "stream" in api_error(response, 400, "invalid_request")
        assert (await get_json(hosted, path))["data"] == []

    async def test_one_active_run_per_thread(self, hosted: HostedHarness) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        other_thread = await hosted.create_thread(agent["id"])
        first = ok(await hosted.start_run(thread["id"]), 202)
        message = api_error(await hosted.start_run(thread["id"]), 409, "thread_busy")
        assert thread["id"] in message
        ok(await hosted.start_run(other_thread["id"]), 202)  # other threads are not blocked
        await hosted.work()
        assert (await hosted.get_run(first["id"]))["status"] == "requires_action"
        api_error(await hosted.start_run(thread["id"]), 409, "thread_busy")
        ok(await hosted.answer(await hosted.get_run(first["id"])))
        api_error(await hosted.start_run(thread["id"]), 409, "thread_busy")
        await hosted.work()
        assert (await hosted.get_run(first["id"]))["status"] == "succeeded"
        second = ok(await hosted.start_run(thread["id"], "And in Bandung?"), 202)
        assert second["id"] != first["id"] and second["status"] == "queued"
        ok(await hosted.client.post(f"/v1/runs/{second['id']}/cancel"))
        third = ok(await hosted.start_run(thread["id"], "And in Medan?"), 202)
        listed = await get_json(hosted, f"/v1/threads/{thread['id']}/runs")
        assert [run["id"] for run in listed["data"]] == [third["id"], second["id"], first["id"]]

    async def test_idempotency_key_returns_the_same_run(self, hosted: HostedHarness) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        other_thread = await hosted.create_thread(agent["id"])
        first = ok(await hosted.start_run(thread["id"], key="order-1"), 202)
        replay = await hosted.start_run(thread["id"], key="order-1")
        assert replay.status_code == 202 and replay.json() == first
        listed = await get_json(hosted, f"/v1/threads/{thread['id']}/runs")
        assert [run["id"] for run in listed["data"]] == [first["id"]]

        elsewhere = ok(await hosted.start_run(other_thread["id"], key="order-1"), 202)
        assert elsewhere["id"] != first["id"] and elsewhere["thread_id"] == other_thread["id"]
        listed = await get_json(hosted, f"/v1/threads/{other_thread['id']}/runs")
        assert [run["id"] for run in listed["data"]] == [elsewhere["id"]]

        # Once the run ended the key still names it, and a new key makes a new run.
        ok(await hosted.client.post(f"/v1/runs/{first['id']}/cancel"))
        again = ok(await hosted.start_run(thread["id"], key="order-1"), 202)
        assert again["id"] == first["id"] and again["status"] == "cancelled"
        fresh = ok(await hosted.start_run(thread["id"], key="order-2"), 202)
        assert fresh["id"] != first["id"] and fresh["status"] == "queued"
        listed = await get_json(hosted, f"/v1/threads/{thread['id']}/runs")
        assert [run["id"] for run in listed["data"]] == [fresh["id"], first["id"]]

    async def test_unknown_thread_or_run_is_404(self, hosted: HostedHarness) -> None:
        response = await hosted.start_run("thr_missing")
        assert "thr_missing" in api_error(response, 404, "not_found")
        for response in (
            await hosted.client.get("/v1/runs/run_missing"),
            await hosted.client.post("/v1/runs/run_missing/cancel"),
            await hosted.client.post(
                "/v1/runs/run_missing/tool_outputs",
                json={"outputs": [{"tool_call_id": "call_1", "output": "x"}]},
            ),
        ):
            assert "run_missing" in api_error(response, 404, "not_found")
        for path in ("/v1/threads/thr_missing/runs", "/v1/threads/thr_missing/messages"):
            assert "thr_missing" in api_error(await hosted.client.get(path), 404, "not_found")


# --- 5. pagination ------------------------------------------------------------------------


class TestPagination:
    async def test_agents_are_paginated_newest_first(self, hosted: HostedHarness) -> None:
        created = [(await hosted.create_agent(name=f"Agent {n}"))["id"] for n in range(5)]
        first = ok(await hosted.client.get("/v1/agents", params={"limit": 2}))
        assert [item["id"] for item in first["data"]] == created[::-1][:2]
        assert first["has_more"] is True and first["next_cursor"] == created[3]
        pages = await walk_pages(hosted, "/v1/agents", 2)
        assert [len(page) for page in pages] == [2, 2, 1]
        assert [item["id"] for page in pages for item in page] == created[::-1]
        everything = await get_json(hosted, "/v1/agents")
        assert [item["id"] for item in everything["data"]] == created[::-1]
        assert everything["has_more"] is False and everything["next_cursor"] is None
        exact = ok(await hosted.client.get("/v1/agents", params={"limit": 5}))
        assert len(exact["data"]) == 5 and exact["has_more"] is False
        assert exact["next_cursor"] is None

    async def test_runs_of_a_thread_are_paginated_newest_first(self, hosted: HostedHarness) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        created = []
        for n in range(5):
            run = ok(await hosted.start_run(thread["id"], f"message {n}"), 202)
            ok(await hosted.client.post(f"/v1/runs/{run['id']}/cancel"))
            created.append(run["id"])
        path = f"/v1/threads/{thread['id']}/runs"
        first = ok(await hosted.client.get(path, params={"limit": 2}))
        assert first["has_more"] is True and first["next_cursor"] == created[3]
        pages = await walk_pages(hosted, path, 2)
        assert [len(page) for page in pages] == [2, 2, 1]
        assert [item["id"] for page in pages for item in page] == created[::-1]
        assert all(set(item) == RUN_FIELDS for page in pages for item in page)

    async def test_messages_are_paginated_oldest_first(self, hosted: HostedHarness) -> None:
        agent = await hosted.create_agent(tools=[])
        thread = await hosted.create_thread(agent["id"])
        conversation = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
            {"role": "user", "content": "three"},
        ]
        run = ok(await hosted.start_run(thread["id"], conversation), 202)
        await hosted.work()
        path = f"/v1/threads/{thread['id']}/messages"
        everything = await get_json(hosted, path)
        contents = [message["content"] for message in everything["data"]]
        assert contents[:4] == ["Be brief.", "one", "two", "three"] and len(contents) == 5
        assert everything["has_more"] is False and everything["next_cursor"] is None
        first = ok(await hosted.client.get(path, params={"limit": 2}))
        assert first["data"] == everything["data"][:2]
        assert first["has_more"] is True and first["next_cursor"] == first["data"][1]["id"]
        pages = await walk_pages(hosted, path, 2)
        assert [len(page) for page in pages] == [2, 2, 1]
        assert [item for page in pages for item in page] == everything["data"]
        assert {item["run_id"] for item in everything["data"]} == {run["id"]}
        unknown = await hosted.client.get(path, params={"after": "msg_missing"})
        assert "msg_missing" in api_error(unknown, 400, "invalid_cursor")

    @pytest.mark.parametrize("limit", [0, 101, -1, "ten"])
    async def test_limit_out_of_range_is_a_400(self, hosted: HostedHarness, limit: Any) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        for path in (
            "/v1/agents",
            f"/v1/agents/{agent['id']}/threads",
            f"/v1/threads/{thread['id']}/runs",
            f"/v1/threads/{thread['id']}/messages",
        ):
            response = await hosted.client.get(path, params={"limit": limit})
            assert "limit" in api_error(response, 400, "invalid_request"), path

    async def test_limits_1_and_100_are_accepted(self, hosted: HostedHarness) -> None:
        agent = await hosted.create_agent()
        for limit in (1, 100):
            page = ok(await hosted.client.get("/v1/agents", params={"limit": limit}))
            assert [item["id"] for item in page["data"]] == [agent["id"]]


# --- 6. transcript ------------------------------------------------------------------------


class TestTranscript:
    async def test_a_tool_round_trip_is_recorded_in_order_with_its_run(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        run = await finished_run(hosted, thread["id"])
        listed = await get_json(hosted, f"/v1/threads/{thread['id']}/messages")
        assert set(listed) == LIST_FIELDS and listed["has_more"] is False
        messages = listed["data"]
        assert all(set(message) == MESSAGE_FIELDS for message in messages)
        assert [message["role"] for message in messages] == [
            "user",
            "assistant",
            "tool",
            "assistant",
        ]
        assert all(message["run_id"] == run["id"] for message in messages)
        assert all(message["thread_id"] == thread["id"] for message in messages)
        assert len({message["id"] for message in messages}) == 4
        user, call, result, answer = messages
        assert user["content"] == WEATHER_QUESTION
        assert user["tool_calls"] is None and user["tool_call_id"] is None
        [tool_call] = call["tool_calls"]
        assert set(tool_call) == {"id", "name", "arguments"}
        assert tool_call["name"] == "get_weather"
        assert isinstance(tool_call["arguments"], str)
        assert json.loads(tool_call["arguments"]) == {"city": "Jakarta"}
        assert result["tool_call_id"] == tool_call["id"]
        assert result["content"] == WEATHER_OUTPUT and result["name"] == "get_weather"
        assert result["tool_calls"] is None
        assert answer["content"] == run["output"] == demo_answer("get_weather", WEATHER_OUTPUT)
        assert answer["tool_calls"] is None and answer["tool_call_id"] is None

    async def test_a_second_run_appends_and_leaves_the_first_unchanged(
        self, hosted: HostedHarness
    ) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        path = f"/v1/threads/{thread['id']}/messages"
        first = await finished_run(hosted, thread["id"])
        before = (await get_json(hosted, path))["data"]
        hosted.clock.advance(30)
        second = await finished_run(
            hosted, thread["id"], run_input="What is the weather in Bandung?"
        )
        after = (await get_json(hosted, path))["data"]
        assert after[:4] == before
        added = after[4:]
        assert [m["role"] for m in added] == ["user", "assistant", "tool", "assistant"]
        assert {m["run_id"] for m in before} == {first["id"]}
        assert {m["run_id"] for m in added} == {second["id"]}
        assert added[0]["content"] == "What is the weather in Bandung?"
        assert json.loads(added[1]["tool_calls"][0]["arguments"]) == {"city": "Bandung"}
        assert all(m["created_at"].startswith("2026-01-01T00:00:30") for m in added)
        assert not {m["id"] for m in added} & {m["id"] for m in before}

    async def test_input_messages_keep_their_roles(self, hosted: HostedHarness) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        conversation = [
            {"role": "system", "content": "Answer in Indonesian."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Halo!"},
            {"role": "user", "content": "What is the weather in Jakarta?"},
        ]
        run = await finished_run(hosted, thread["id"], run_input=conversation)
        messages = (await get_json(hosted, f"/v1/threads/{thread['id']}/messages"))["data"]
        assert [(m["role"], m["content"]) for m in messages[:4]] == [
            (item["role"], item["content"]) for item in conversation
        ]
        assert [m["role"] for m in messages[4:]] == ["assistant", "tool", "assistant"]
        assert {m["run_id"] for m in messages} == {run["id"]}


# --- 7. tenant isolation ------------------------------------------------------------------

Sample = tuple[str, str, dict[str, Any]]


def samples(run: dict[str, Any]) -> list[Sample]:
    """One request per `/v1` route with an id: (method, path template, httpx arguments).

    Bodies are valid, so only the ownership check can answer 404.
    """
    outputs = [{"tool_call_id": call["id"], "output": "x"} for call in run["pending_tool_calls"]]
    return [
        ("GET", "/v1/agents/{agent_id}", {}),
        ("PATCH", "/v1/agents/{agent_id}", {"json": {"name": "Hijacked", "max_steps": 1}}),
        ("POST", "/v1/agents/{agent_id}/threads", {"json": {"title": "Hijacked"}}),
        ("GET", "/v1/agents/{agent_id}/threads", {}),
        ("GET", "/v1/threads/{thread_id}", {}),
        ("GET", "/v1/threads/{thread_id}/messages", {}),
        ("GET", "/v1/threads/{thread_id}/runs", {}),
        ("POST", "/v1/threads/{thread_id}/runs", {"json": {"input": "hi"}}),
        ("POST", "/v1/threads/{thread_id}/runs", {"json": {"input": "hi", "stream": True}}),
        ("GET", "/v1/runs/{run_id}", {}),
        ("GET", "/v1/runs/{run_id}", {"params": {"wait": 1}}),
        ("GET", "/v1/runs/{run_id}/events", {}),
        ("POST", "/v1/runs/{run_id}/stream_token", {}),
        ("POST", "/v1/runs/{run_id}/tool_outputs", {"json": {"outputs": outputs}}),
        ("POST", "/v1/runs/{run_id}/cancel", {}),
        ("GET", "/v1/files/{file_id}", {}),
        ("GET", "/v1/files/{file_id}/content", {}),
        ("GET", "/v1/documents/{document_id}", {}),
        ("DELETE", "/v1/documents/{document_id}", {}),
        ("DELETE", "/v1/agents/{agent_id}", {}),
    ]


def v1_routes_with_ids(hosted: HostedHarness) -> set[tuple[str, str]]:
    """(method, path) of every `/v1` route with an id parameter, included routers walked too."""
    return {
        (method, context.path)
        for context in iter_route_contexts(hosted.app.routes)
        if isinstance(context.original_route, APIRoute)
        and context.path is not None
        and context.path.startswith("/v1/")
        and re.search(r"\{\w+_id\}", context.path)
        for method in context.methods or ()
    }


async def table_sizes(hosted: HostedHarness) -> dict[str, int]:
    async with hosted.context.engine.connect() as connection:
        return {
            table.name: int(await connection.scalar(select(func.count()).select_from(table)) or 0)
            for table in (agents, threads, runs, thread_messages, files, documents, document_chunks)
        }


async def snapshot(hosted: HostedHarness, ids: dict[str, str]) -> dict[str, Any]:
    """Everything the local account can see of its objects, and the size of every table."""
    paths = [
        "/v1/agents",
        "/v1/agents/{agent_id}",
        "/v1/agents/{agent_id}/threads",
        "/v1/threads/{thread_id}",
        "/v1/threads/{thread_id}/messages",
        "/v1/threads/{thread_id}/runs",
        "/v1/runs/{run_id}",
        "/v1/files/{file_id}",
        "/v1/documents",
        "/v1/documents/{document_id}",
    ]
    seen = {path: await get_json(hosted, path.format(**ids)) for path in paths}
    content = await hosted.client.get("/v1/files/{file_id}/content".format(**ids))
    seen["file_content"] = (content.status_code, content.content)
    seen["checkpoints"] = len(await checkpoints(hosted, ids["thread_id"]))
    seen["tables"] = await table_sizes(hosted)
    return seen


class TestTenantIsolation:
    @pytest.fixture
    async def other_account(self, hosted: HostedHarness) -> AsyncIterator[dict[str, str]]:
        other = await hosted.new_account("other")
        assert other != hosted.headers
        yield other
        hosted.act_as(None)

    async def test_every_route_with_an_id_is_in_the_sample_table(
        self, hosted: HostedHarness
    ) -> None:
        table = {(method, path) for method, path, _ in samples({"pending_tool_calls": []})}
        routes = v1_routes_with_ids(hosted)
        assert routes - table == set(), "routes without a sample request"
        assert table - routes == set(), "samples for routes that do not exist"
        # The walk sees a route added later, so the table cannot silently fall behind.
        hosted.app.add_api_route("/v1/widgets/{widget_id}", lambda widget_id: {}, methods=["PUT"])
        assert v1_routes_with_ids(hosted) - table == {("PUT", "/v1/widgets/{widget_id}")}

    async def test_another_accounts_ids_are_404_everywhere_and_change_nothing(
        self, hosted: HostedHarness, other_account: dict[str, str]
    ) -> None:
        agent = await hosted.create_agent()
        thread = await hosted.create_thread(agent["id"])
        run = await paused_run(hosted, thread["id"])
        ids = {
            "agent_id": agent["id"],
            "thread_id": thread["id"],
            "run_id": run["id"],
            "file_id": await hosted.speech_file(),
            "document_id": await hosted.upload_document("notes.md", b"# Notes\n\nPrivate."),
        }
        before = await snapshot(hosted, ids)
        assert before["checkpoints"] > 0 and before["/v1/threads/{thread_id}/messages"]["data"]

        hosted.act_as(other_account)
        requests = samples(run)
        assert {(m, p) for m, p, _ in requests} == v1_routes_with_ids(hosted)
        for method, template, arguments in requests:
            path = template.format(**ids)
            response = await hosted.client.request(method, path, **arguments)
            message = api_error(response, 404, "not_found")
            assert path.split("/")[3] in message, (method, path, message)
        assert (await get_json(hosted, "/v1/agents"))["data"] == []

        hosted.act_as(None)
        assert await snapshot(hosted, ids) == before
        assert (await hosted.get_run(run["id"]))["status"] == "requires_action"

    async def test_the_other_account_sees_only_its_own_objects(
        self, hosted: HostedHarness, other_account: dict[str, str]
    ) -> None:
        mine = await hosted.create_agent(name="Mine")
        hosted.act_as(other_account)
        theirs = await hosted.create_agent(name="Theirs")
        their_thread = await hosted.create_thread(theirs["id"])
        listed = await get_json(hosted, "/v1/agents")
        assert [agent["id"] for agent in listed["data"]] == [theirs["id"]]
        api_error(await hosted.client.get(f"/v1/agents/{mine['id']}"), 404, "not_found")
        hosted.act_as(None)
        listed = await get_json(hosted, "/v1/agents")
        assert [agent["id"] for agent in listed["data"]] == [mine["id"]]
        api_error(await hosted.client.get(f"/v1/threads/{their_thread['id']}"), 404, "not_found")
