"""The edges: one error envelope per face, limits on what comes in, strict structure where the
API promises it (tool schemas, cursors, idempotency keys)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from juru.app import create_app
from juru.core.clock import ManualClock
from juru.hosted import documents as documents_module
from juru.settings import Settings
from tests.conftest import start_client
from tests.support.hosted import WEATHER_TOOL, HostedHarness, api_error

MAX_BODY = 4096


@pytest.fixture
async def edges(settings_factory: Callable[..., Settings]) -> AsyncIterator[HostedHarness]:
    clock = ManualClock()
    settings = settings_factory(
        workers=0,
        runtime_enabled=True,
        max_body_bytes=MAX_BODY,
        max_input_messages=5,
        max_input_characters=1000,
        documents_processing_seconds=0.5,
    )
    app = create_app(settings, clock=clock)
    async for client in start_client(app):
        harness = HostedHarness(app, client, clock)
        await harness.sign_in()
        yield harness


def function_tool(**function: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "lookup", **function}}


class TestEnvelope:
    async def test_unknown_routes_and_wrong_methods(self, edges: HostedHarness) -> None:
        missing = await edges.client.get("/v1/nothing-here")
        assert "/v1/nothing-here" in api_error(missing, 404, "not_found")
        assert "GET" in api_error(await edges.client.get("/nowhere"), 404, "not_found")
        wrong = await edges.client.delete("/v1/models")
        assert "GET" in api_error(wrong, 405, "method_not_allowed")
        assert wrong.headers["allow"] == "GET"
        # A path served by several routes (GET and POST here): `Allow` names them all.
        both = await edges.client.put("/v1/agents")
        api_error(both, 405, "method_not_allowed")
        assert both.headers["allow"] == "GET, POST"

    async def test_the_specified_faces_keep_their_shapes(self, edges: HostedHarness) -> None:
        playground = await edges.client.get("/playground/nothing")
        assert playground.status_code == 404 and playground.json() == {"detail": "Not Found"}
        runtime = await edges.client.get("/api/nothing")
        assert runtime.status_code == 404 and set(runtime.json()) == {"error"}
        broken = b'{"feature": "ReAct",\n "message": }'
        headers = {"content-type": "application/json"}
        listed = await edges.client.post("/playground/messages", content=broken, headers=headers)
        assert listed.status_code == 422
        [item] = listed.json()["detail"]
        assert item["type"] == "json_invalid" and "line 2 column 13" in item["msg"]
        shape = await edges.client.post("/playground/messages", json={"feature": "ReAct"})
        assert shape.status_code == 422
        assert [item["loc"] for item in shape.json()["detail"]] == [["body", "message"]]
        assert all(set(item) == {"type", "loc", "msg"} for item in shape.json()["detail"])
        contract = await edges.client.post("/api/reasoning_engine", content=broken, headers=headers)
        assert contract.status_code == 400 and "line 2 column 13" in contract.json()["error"]

    async def test_malformed_json_names_the_line_and_column(self, edges: HostedHarness) -> None:
        response = await edges.client.post(
            "/v1/agents",
            content=b'{\n  "name": "x",\n  oops\n}',
            headers={"content-type": "application/json"},
        )
        assert "line 3 column 3" in api_error(response, 400, "invalid_json")
        deep = b"[" * 4000
        response = await edges.client.post(
            "/v1/agents", content=deep, headers={"content-type": "application/json"}
        )
        api_error(response, 400, "invalid_json")

    async def test_shape_errors_list_each_field(self, edges: HostedHarness) -> None:
        response = await edges.client.post(
            "/v1/agents", json={"name": "", "model_id": "juru/demo", "max_steps": 99}
        )
        api_error(response, 400, "invalid_request")
        fields = {item["path"] for item in response.json()["error"]["fields"]}
        assert fields == {"name", "max_steps"}
        query = await edges.client.get("/v1/agents", params={"limit": "lots"})
        api_error(query, 400, "invalid_request")
        assert [f["path"] for f in query.json()["error"]["fields"]] == ["query.limit"]

    async def test_chat_errors_carry_no_library_text(self, edges: HostedHarness) -> None:
        body = {"model": "juru/demo", "messages": [{"role": "user", "content": "hi"}]}
        for messages in (
            [{"role": "wizard", "content": "hi"}],
            [{"role": "user", "content": 42}],
            [{"role": "tool", "content": "x"}],
            [{"role": "assistant", "tool_calls": [{"id": "c1", "function": {}}]}],
            ["just text"],
        ):
            response = await edges.client.post(
                "/v1/chat/completions", json={**body, "messages": messages}
            )
            message = api_error(response, 400, "invalid_request")
            assert message.startswith("messages.0"), message
            assert "validation error" not in message and "troubleshooting" not in message.lower()


class TestLimits:
    async def test_a_body_over_the_limit_is_refused_from_its_length(
        self, edges: HostedHarness
    ) -> None:
        agent = await edges.create_agent()
        response = await edges.client.patch(
            f"/v1/agents/{agent['id']}", json={"system_prompt": "x" * MAX_BODY}
        )
        assert str(MAX_BODY) in api_error(response, 413, "request_too_large")
        assert (await edges.client.get(f"/v1/agents/{agent['id']}")).json() == agent

    async def test_a_streamed_body_is_cut_off_at_the_limit(self, edges: HostedHarness) -> None:
        sent = []

        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"name": "big", "model_id": "juru/demo", "system_prompt": "'
            for index in range(100):
                sent.append(index)
                yield b"x" * 1024
            yield b'"}'

        response = await edges.client.post(
            "/v1/agents", content=chunks(), headers={"content-type": "application/json"}
        )
        api_error(response, 413, "request_too_large")
        assert len(sent) <= MAX_BODY // 1024 + 1
        assert (await edges.client.get("/v1/agents")).json()["data"] == []

    async def test_documents_keep_their_own_limit(self, edges: HostedHarness) -> None:
        text = ("Medan is a city in North Sumatra. " * 400).encode()
        assert len(text) > MAX_BODY
        files = {"file": ("medan.txt", text, "text/plain")}
        response = await edges.client.post("/v1/documents", files=files)
        assert response.status_code == 201, response.text

    async def test_run_input_caps_name_their_setting(self, edges: HostedHarness) -> None:
        agent = await edges.create_agent()
        thread = await edges.create_thread(agent["id"])
        many = [{"role": "user", "content": "hi"}] * 6
        message = api_error(await edges.start_run(thread["id"], many), 400, "input_too_large")
        assert "JURU_MAX_INPUT_MESSAGES" in message and "5" in message
        long = [{"role": "user", "content": "x" * 1001}]
        message = api_error(await edges.start_run(thread["id"], long), 400, "input_too_large")
        assert "JURU_MAX_INPUT_CHARACTERS" in message
        assert (await edges.client.get(f"/v1/threads/{thread['id']}/runs")).json()["data"] == []
        ok = await edges.start_run(thread["id"], [{"role": "user", "content": "x" * 1000}] * 1)
        assert ok.status_code == 202, ok.text

    async def test_chat_caps_name_their_setting(self, edges: HostedHarness) -> None:
        many = [{"role": "user", "content": "hi"}] * 6
        body = {"model": "juru/demo", "messages": many}
        message = api_error(
            await edges.client.post("/v1/chat/completions", json=body), 400, "input_too_large"
        )
        assert "JURU_MAX_INPUT_MESSAGES" in message
        body["messages"] = [{"role": "user", "content": [{"type": "text", "text": "y" * 1001}]}]
        message = api_error(
            await edges.client.post("/v1/chat/completions", json=body), 400, "input_too_large"
        )
        assert "JURU_MAX_INPUT_CHARACTERS" in message

    async def test_documents_are_read_off_the_event_loop_within_a_time_bound(
        self, edges: HostedHarness, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        started, release = threading.Event(), threading.Event()
        threads = []

        def held_chunks(text: str) -> list[str]:
            threads.append(threading.get_ident())
            started.set()
            release.wait(10)
            return [text]

        monkeypatch.setattr(documents_module, "chunk_text", held_chunks)
        files = {"file": ("slow.txt", b"slow words", "text/plain")}
        upload = asyncio.ensure_future(edges.client.post("/v1/documents", files=files))
        await asyncio.to_thread(started.wait, 10)
        # The loop still answers while the document is being read.
        listed = await edges.client.get("/v1/documents")
        assert listed.status_code == 200 and not upload.done()
        response = await upload
        release.set()
        assert "0.5 s" in api_error(response, 413, "document_too_complex")
        assert threads and threads[0] != threading.get_ident()
        assert (await edges.client.get("/v1/documents")).json()["data"] == []


class TestStructure:
    async def test_bodies_take_their_types_as_described(self, edges: HostedHarness) -> None:
        # `0` is no boolean and `"5"` no number, as the published description says.
        chat = {"model": "juru/demo", "messages": [{"role": "user", "content": "hi"}]}
        loose = {**chat, "stream_options": {"include_usage": 0}}
        response = await edges.client.post("/v1/chat/completions", json=loose)
        assert "include_usage" in api_error(response, 400, "invalid_request")
        agent = {"name": "a", "model_id": "juru/demo", "max_steps": "5"}
        response = await edges.client.post("/v1/agents", json=agent)
        assert "max_steps" in api_error(response, 400, "invalid_request")
        assert (await edges.client.post("/v1/chat/completions", json=chat)).status_code == 200

    @pytest.mark.parametrize(
        ("parameters", "named"),
        [
            pytest.param({"type": "banana"}, "type", id="unknown-type"),
            pytest.param({"type": "string"}, "object", id="not-an-object"),
            pytest.param({"type": "object", "required": "city"}, "required", id="bad-keyword"),
            pytest.param(
                {"type": "object", "properties": {"city": {"type": "strin"}}},
                "properties.city.type",
                id="nested",
            ),
            pytest.param({"properties": {}}, "object", id="no-type"),
        ],
    )
    async def test_tool_parameters_must_be_a_json_schema_object(
        self, edges: HostedHarness, parameters: dict[str, Any], named: str
    ) -> None:
        body = {
            "name": "x",
            "model_id": "juru/demo",
            "tools": [function_tool(parameters=parameters)],
        }
        response = await edges.client.post("/v1/agents", json=body)
        message = api_error(response, 400, "invalid_request")
        assert named in message
        assert [f["path"] for f in response.json()["error"]["fields"]] == [
            "tools.0.function.parameters"
        ]
        agent = await edges.create_agent()
        patch = await edges.client.patch(
            f"/v1/agents/{agent['id']}", json={"tools": [function_tool(parameters=parameters)]}
        )
        api_error(patch, 400, "invalid_request")
        chat = await edges.client.post(
            "/v1/chat/completions",
            json={
                "model": "juru/demo",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [function_tool(parameters=parameters)],
            },
        )
        assert "tools.0.function.parameters" in api_error(chat, 400, "invalid_request")

    async def test_a_good_schema_is_kept(self, edges: HostedHarness) -> None:
        agent = await edges.create_agent(tools=[WEATHER_TOOL])
        assert agent["tools"] == [WEATHER_TOOL]

    @pytest.mark.parametrize(
        ("tool", "named"),
        [
            pytest.param({"type": "function"}, "tools.0.function", id="no-function"),
            pytest.param({"type": "function", "function": {}}, "function.name", id="no-name"),
            pytest.param({"type": "web"}, "tools.0.type", id="other-type"),
        ],
    )
    async def test_chat_tools_need_a_named_function(
        self, edges: HostedHarness, tool: dict[str, Any], named: str
    ) -> None:
        body = {
            "model": "juru/demo",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": [tool],
        }
        response = await edges.client.post("/v1/chat/completions", json=body)
        assert named in api_error(response, 400, "invalid_request")

    async def test_unknown_cursors_are_refused(self, edges: HostedHarness) -> None:
        agent = await edges.create_agent()
        other = await edges.create_agent()
        thread = await edges.create_thread(agent["id"])
        lists = [
            "/v1/agents",
            f"/v1/agents/{agent['id']}/threads",
            f"/v1/threads/{thread['id']}/runs",
            f"/v1/threads/{thread['id']}/messages",
            "/v1/documents",
        ]
        # A well-formed id that is no object's: the thread's id with its last digit changed.
        near = thread["id"][:-1] + ("1" if thread["id"].endswith("0") else "0")
        for path in lists:
            for cursor in ("garbled!", "agt_zz", near, other["id"] + "x"):
                response = await edges.client.get(path, params={"after": cursor})
                api_error(response, 400, "invalid_cursor")
        # An id of another list is no cursor of this one.
        response = await edges.client.get(
            f"/v1/agents/{agent['id']}/threads", params={"after": other["id"]}
        )
        api_error(response, 400, "invalid_cursor")
        listed = await edges.client.get("/v1/agents", params={"after": other["id"]})
        assert listed.status_code == 200
        assert [item["id"] for item in listed.json()["data"]] == [agent["id"]]

    async def test_an_idempotency_key_replays_only_its_own_body(self, edges: HostedHarness) -> None:
        agent = await edges.create_agent()
        thread = await edges.create_thread(agent["id"])
        first = await edges.start_run(thread["id"], "Weather in Medan?", key="k1")
        assert first.status_code == 202
        same = await edges.start_run(
            thread["id"], [{"role": "user", "content": "Weather in Medan?"}], key="k1"
        )
        assert same.status_code == 202 and same.json() == first.json()
        other = await edges.start_run(thread["id"], "Weather in Bali?", key="k1")
        message = api_error(other, 422, "idempotency_key_reused")
        assert first.json()["id"] in message
        runs = (await edges.client.get(f"/v1/threads/{thread['id']}/runs")).json()["data"]
        assert [run["id"] for run in runs] == [first.json()["id"]]

    async def test_an_idempotency_key_expires_after_a_day(self, edges: HostedHarness) -> None:
        agent = await edges.create_agent()
        thread = await edges.create_thread(agent["id"])
        first = (await edges.start_run(thread["id"], "Weather in Medan?", key="k1")).json()
        await edges.client.post(f"/v1/runs/{first['id']}/cancel")
        edges.clock.advance(24 * 3600 - 1)
        still = await edges.start_run(thread["id"], "Weather in Medan?", key="k1")
        assert still.json()["id"] == first["id"]
        edges.clock.advance(1)
        fresh = await edges.start_run(thread["id"], "Weather in Bali?", key="k1")
        assert fresh.status_code == 202 and fresh.json()["id"] != first["id"]
        again = await edges.start_run(thread["id"], "Weather in Bali?", key="k1")
        assert again.json()["id"] == fresh.json()["id"]

    async def test_usage_dates_at_the_end_of_time(self, edges: HostedHarness) -> None:
        response = await edges.client.get("/v1/usage", params={"to": "9999-12-31"})
        assert "to" in api_error(response, 400, "invalid_request")
        response = await edges.client.get(
            "/v1/usage", params={"from": "9999-12-30", "to": "9999-12-30"}
        )
        assert response.status_code == 200 and response.json()["data"] == []
        # A number is not a day (pydantic alone would read it as a Unix time).
        response = await edges.client.get("/v1/usage", params={"to": "0"})
        assert "to" in api_error(response, 400, "invalid_request")
