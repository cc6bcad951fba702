"""No error body and no run error shows SQL, parameters, a database address or a stack trace:
the errors the suite knows how to provoke, on every face, greped for them."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from juru.app import create_app
from juru.settings import Settings
from tests.conftest import start_client
from tests.support.hosted import HostedHarness
from tests.support.leaks import assert_no_internals, leaked


def test_the_grep_finds_what_a_database_error_prints() -> None:
    sqlalchemy_text = (
        "(psycopg.errors.UniqueViolation) duplicate key\n[SQL: INSERT INTO runs (id) VALUES "
        "(%(id)s)]\n[parameters: {'id': 'run_1'}]\n(Background on this error at: "
        "https://sqlalche.me/e/20/gkpj)"
    )
    assert {"INSERT INTO", "[parameters:", "sqlalche.me"} <= set(leaked(sqlalchemy_text))
    assert leaked('Traceback (most recent call last):\n  File "x.py"')
    assert leaked("connection to server at 127.0.0.1:5432 failed")
    assert not leaked("no agent with id 'agt_x'")


async def test_bad_input_and_unknown_ids_on_the_api_show_no_internals(
    hosted: HostedHarness,
) -> None:
    client = hosted.client
    errors: list[httpx.Response] = [
        await client.post("/v1/agents", content=b'{"name": ', headers={"content-type": "x"}),
        await client.post("/v1/agents", json={"name": 3, "model_id": []}),
        await client.post("/v1/agents", json={"name": "a", "model_id": "nobody/nothing"}),
        await client.get("/v1/agents/agt_nope"),
        await client.get("/v1/threads/thr_nope"),
        await client.get("/v1/runs/run_nope"),
        await client.post("/v1/threads/thr_nope/runs", json={"input": "hi"}),
        await client.get("/v1/agents?after=agt_nope"),
        await client.get("/v1/usage?to=9999-12-31"),
        await client.get("/v1/files/file_%00"),
        await client.get("/v1/no/such/route"),
        await client.post("/v1/chat/completions", json={"model": "juru/nope", "messages": []}),
        await client.post(
            "/v1/chat/completions",
            json={"model": "openai/gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
        ),
    ]
    hosted.act_as({"Authorization": "Bearer juru_live_nothing"})
    errors.append(await client.get("/v1/agents"))
    for response in errors:
        assert response.status_code >= 400, response.text
        assert_no_internals(response)


async def test_failed_runs_show_no_internals(hosted: HostedHarness) -> None:
    limited = await hosted.new_run(max_steps=1)
    await hosted.work()
    await hosted.answer(await hosted.get_run(limited["id"]))
    keyless = await hosted.new_run(model_id="openai/gpt-4o-mini")
    await hosted.work()
    for run_id in (limited["id"], keyless["id"]):
        run = await hosted.get_run(run_id)
        assert run["status"] == "failed" and run["error"], run
        assert_no_internals(run)
    run = await hosted.get_run(keyless["id"])
    assert "OPENAI_API_KEY" in run["error"] and "Error:" not in run["error"]


async def test_playground_and_runtime_errors_show_no_internals(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(runtime_enabled=True, workers=0)
    async for client in start_client(create_app(settings)):
        errors = [
            await client.post("/playground/messages", json={"feature": 3}),
            await client.post("/playground/messages", content=b"{", headers={"a": "b"}),
            await client.post("/playground/messages", json={"feature": "Nope", "message": "hi"}),
            await client.post("/playground/resume", json={"feature": "ReAct", "thread_id": "x"}),
            await client.post("/chat", json={"message": "  "}),
            await client.post("/api/reasoning_engine", json={"class_method": "query"}),
            await client.post("/api/reasoning_engine", content=b"{"),
            await client.post(
                "/api/reasoning_engine",
                json={"class_method": "get_session", "input": {"user_id": "a", "session_id": "b"}},
            ),
            await client.post(
                "/api/stream_reasoning_engine",
                json={"class_method": "async_stream_query", "input": {"message": "hi"}},
            ),
        ]
        for response in errors:
            assert response.status_code >= 400, response.text
            assert_no_internals(response)
