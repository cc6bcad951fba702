"""The Agent Runtime contract in process, on both databases: class methods, sessions, errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from decimal import Decimal
from typing import Any

import httpx
import pytest
from httpx import AsyncClient

from juru.app import create_app
from juru.runtime.agents import RuntimeAgentConfigError
from juru.runtime.methods import class_methods_spec
from juru.runtime.service import session_thread
from juru.settings import Settings
from juru.store.pruning import count_checkpoints
from juru.store.usage import usage_by_day
from tests.conftest import openai_env, start_client
from tests.support.fake_openai import FakeOpenAIServer
from tests.support.hosted import WEATHER_TOOL

UNARY = "/api/reasoning_engine"
STREAM = "/api/stream_reasoning_engine"
OPENAI_MODEL = "openai/gpt-4o-mini"
WEATHER_CALL = {"name": "get_weather", "arguments": {"location": "Jakarta"}}


@pytest.fixture
async def runtime(settings_factory: Callable[..., Settings]) -> AsyncIterator[AsyncClient]:
    """The runtime on, serving the default agent (ReAct) on the demo model."""
    settings = settings_factory(runtime_enabled=True, workers=0, playground_enabled=False)
    async for client in start_client(create_app(settings)):
        yield client


@pytest.fixture
async def runtime_openai(
    settings_factory: Callable[..., Settings], fake_openai: FakeOpenAIServer
) -> AsyncIterator[AsyncClient]:
    """The runtime serving ReAct on a real OpenAI client talking to the fake server."""
    settings = settings_factory(
        runtime_enabled=True,
        workers=0,
        default_model=OPENAI_MODEL,
        provider_env=openai_env(fake_openai),
    )
    async for client in start_client(create_app(settings)):
        yield client


async def call(client: AsyncClient, method: str, **arguments: Any) -> httpx.Response:
    return await client.post(UNARY, json={"class_method": method, "input": arguments})


async def output(client: AsyncClient, method: str, **arguments: Any) -> Any:
    response = await call(client, method, **arguments)
    assert response.status_code == 200, response.text
    return response.json()["output"]


async def stream(client: AsyncClient, method: str, **arguments: Any) -> httpx.Response:
    return await client.post(STREAM, json={"class_method": method, "input": arguments})


def lines(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.headers["content-type"] == "application/json"
    return [json.loads(line) for line in response.text.splitlines()]


async def test_query_answers_the_final_text(runtime: AsyncClient) -> None:
    answer = await output(runtime, "query", message="What is the weather in Jakarta?")
    assert "Jakarta" in answer and "demo weather data" in answer
    alias = await output(runtime, "query", input="What is the weather in Paris?")
    assert "Paris" in alias


async def test_stream_query_streams_the_answer_in_pieces(runtime: AsyncClient) -> None:
    response = await stream(runtime, "stream_query", message="What is the weather in Jakarta?")
    assert response.status_code == 200
    chunks = lines(response)
    assert len(chunks) > 2 and all(set(chunk) == {"output"} for chunk in chunks)
    whole = await output(runtime, "query", message="What is the weather in Jakarta?")
    assert "".join(chunk["output"] for chunk in chunks) == whole


async def test_a_session_is_created_listed_fetched_continued_and_deleted(
    runtime: AsyncClient,
) -> None:
    created = await output(runtime, "async_create_session", user_id="ana", state={"lang": "id"})
    assert set(created) == {"id", "app_name", "user_id", "state", "events", "last_update_time"}
    assert (created["app_name"], created["user_id"]) == ("ReAct", "ana")
    assert (created["state"], created["events"]) == ({"lang": "id"}, [])
    session = created["id"]
    other = await output(runtime, "create_session", user_id="ana", session_id="second")
    assert other["id"] == "second"

    listed = await output(runtime, "async_list_sessions", user_id="ana")
    assert [s["id"] for s in listed["sessions"]] == [session, "second"]
    assert await output(runtime, "list_sessions", user_id="bob") == {"sessions": []}

    first = await output(
        runtime, "query", message="My name is Ana.", user_id="ana", session_id=session
    )
    assert first
    remembered = await output(
        runtime, "query", message="What is my name?", user_id="ana", session_id=session
    )
    assert "Ana" in remembered
    fresh = await output(runtime, "query", message="What is my name?")
    assert "Ana" not in fresh

    fetched = await output(runtime, "get_session", user_id="ana", session_id=session)
    texts = [(e["author"], e["content"]["parts"][0]["text"]) for e in fetched["events"]]
    assert texts[0] == ("user", "My name is Ana.")
    assert texts[2] == ("user", "What is my name?")
    assert texts[3] == ("ReAct", remembered)
    assert fetched["events"][0]["invocation_id"] != fetched["events"][2]["invocation_id"]
    assert fetched["last_update_time"] >= created["last_update_time"]
    assert await output(runtime, "async_get_session", user_id="ana", session_id=session) == fetched

    assert await output(runtime, "async_delete_session", user_id="ana", session_id=session) is None
    missing = await call(runtime, "get_session", user_id="ana", session_id=session)
    assert missing.status_code == 404 and session in missing.json()["error"]
    assert await output(runtime, "delete_session", user_id="ana", session_id="second") is None
    assert await output(runtime, "list_sessions", user_id="ana") == {"sessions": []}


async def test_a_sessions_older_checkpoints_are_dropped_after_each_turn(
    settings_factory: Callable[..., Settings],
) -> None:
    app = create_app(settings_factory(runtime_enabled=True, workers=0, playground_enabled=False))
    async for client in start_client(app):
        await output(client, "create_session", user_id="ana", session_id="s-prune")
        for message in ("My name is Ana.", "What is my name?"):
            await output(client, "query", message=message, user_id="ana", session_id="s-prune")
        checkpointer = app.state.context.checkpointer
        assert await count_checkpoints(checkpointer, session_thread("s-prune")) == 1
        state = await checkpointer.aget({"configurable": {"thread_id": session_thread("s-prune")}})
        assert "Ana" in state["channel_values"]["messages"][-1].content  # the conversation stays


class CountedSaves:
    """A saver's `aput`, counting its calls (the saves still reach the database)."""

    def __init__(self, save: Callable[..., Awaitable[Any]]) -> None:
        self.save = save
        self.count = 0

    async def __call__(self, *arguments: Any, **options: Any) -> Any:
        self.count += 1
        return await self.save(*arguments, **options)


async def test_a_turn_saves_its_sessions_checkpoint_once(
    settings_factory: Callable[..., Settings], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(settings_factory(runtime_enabled=True, workers=0, playground_enabled=False))
    async for client in start_client(app):
        await output(client, "create_session", user_id="ana", session_id="s-once")
        checkpointer = app.state.context.checkpointer
        saves = CountedSaves(checkpointer.aput)
        monkeypatch.setattr(checkpointer, "aput", saves)
        # Three steps: the model calls the weather tool, the tool answers, the model answers.
        await output(
            client,
            "query",
            message="What is the weather in sf?",
            user_id="ana",
            session_id="s-once",
        )
        assert saves.count == 1
        state = await checkpointer.aget({"configurable": {"thread_id": session_thread("s-once")}})
        kinds = [message.type for message in state["channel_values"]["messages"]]
        assert kinds == ["human", "ai", "tool", "ai"]


async def test_another_users_session_is_missing(runtime: AsyncClient) -> None:
    session = (await output(runtime, "create_session", user_id="ana"))["id"]
    for method in ("get_session", "async_delete_session"):
        response = await call(runtime, method, user_id="bob", session_id=session)
        assert response.status_code == 404
        assert response.json() == {"error": f"session {session} not found for user bob"}
    query = await call(runtime, "query", message="hi", user_id="bob", session_id=session)
    assert query.status_code == 404
    adk = await stream(
        runtime, "async_stream_query", message="hi", user_id="bob", session_id=session
    )
    assert adk.status_code == 404 and "error" in adk.json()
    assert (await output(runtime, "get_session", user_id="ana", session_id=session))[
        "id"
    ] == session


async def test_a_chosen_session_id_cannot_be_taken_twice(runtime: AsyncClient) -> None:
    await output(runtime, "create_session", user_id="ana", session_id="s-1")
    again = await call(runtime, "create_session", user_id="bob", session_id="s-1")
    assert again.status_code == 409 and "s-1" in again.json()["error"]


async def test_async_stream_query_streams_adk_events_and_creates_a_session(
    runtime_openai: AsyncClient, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {"content": "Let me check.", "tool_calls": [WEATHER_CALL]},
            {"content": "Jakarta is warm."},
        ]
    )
    message = {"role": "user", "parts": [{"text": "Cuaca di Jakarta?"}]}
    response = await stream(runtime_openai, "async_stream_query", message=message, user_id="ana")
    assert response.status_code == 200
    events = lines(response)
    parts = [event["content"]["parts"] for event in events]
    assert parts[0][0] == {"text": "Let me check."}
    call_part = parts[0][1]["function_call"]
    assert (call_part["name"], call_part["args"]) == ("get_weather", {"location": "Jakarta"})
    reply = parts[1][0]["function_response"]
    assert (reply["id"], reply["name"]) == (call_part["id"], "get_weather")
    assert "Jakarta" in reply["response"]["result"]
    assert parts[2] == [{"text": "Jakarta is warm."}]
    assert [event["content"]["role"] for event in events] == ["model", "user", "model"]
    assert {event["author"] for event in events} == {"ReAct"}
    assert len({event["invocation_id"] for event in events}) == 1
    sessions = (await output(runtime_openai, "list_sessions", user_id="ana"))["sessions"]
    assert len(sessions) == 1
    stored = await output(
        runtime_openai, "get_session", user_id="ana", session_id=sessions[0]["id"]
    )
    assert stored["events"][1:] == events


async def test_the_generated_class_methods_are_exactly_what_the_endpoints_accept(
    runtime: AsyncClient,
) -> None:
    spec = class_methods_spec()
    assert sorted(method["name"] for method in spec) == sorted(
        [
            "query",
            "stream_query",
            "async_stream_query",
            *(
                f"{prefix}{verb}"
                for prefix in ("", "async_")
                for verb in ("create_session", "get_session", "list_sessions", "delete_session")
            ),
        ]
    )
    for method in spec:
        path = STREAM if method["api_mode"] in ("stream", "async_stream") else UNARY
        other = UNARY if path == STREAM else STREAM
        answer = await runtime.post(path, json={"class_method": method["name"], "input": {}})
        assert answer.status_code == 400 and answer.json()["error"].startswith("input"), answer.text
        wrong = await runtime.post(other, json={"class_method": method["name"], "input": {}})
        assert wrong.status_code == 400 and path in wrong.json()["error"]
    for path in (UNARY, STREAM):
        unknown = await runtime.post(path, json={"class_method": "bidi_stream_query", "input": {}})
        assert unknown.status_code == 400
        assert unknown.json()["error"].startswith("unknown class_method 'bidi_stream_query'")


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"class_method": "query", "input": {}}, "message (or input)"),
        ({"class_method": "query"}, "message (or input)"),
        ({"class_method": "query", "input": {"message": "  "}}, "white space"),
        ({"class_method": "query", "input": {"message": "a", "input": "b"}}, "exactly one"),
        ({"class_method": "query", "input": {"message": "a", "decisions": [{}]}}, "exactly one"),
        ({"class_method": "query", "input": {"decisions": [{"type": "approve"}]}}, "session_id"),
        ({"class_method": "query", "input": {"message": 3}}, "input.message"),
        ({"class_method": "query", "input": {"mesage": "hi"}}, "input.mesage"),
        ({"class_method": "query", "input": {"message": "hi", "session_id": "x"}}, "user_id"),
        ({"class_method": "get_session", "input": {"user_id": "ana"}}, "input.session_id"),
        ({"class_method": "create_session", "input": {"user_id": ""}}, "input.user_id"),
        ({"input": {"message": "hi"}}, "class_method"),
        ({"class_method": "query", "input": "hi"}, "input"),
    ],
)
async def test_missing_or_wrong_input_is_400_naming_the_problem(
    runtime: AsyncClient, body: dict[str, Any], problem: str
) -> None:
    response = await runtime.post(UNARY, json=body)
    assert response.status_code == 400
    assert set(response.json()) == {"error"} and problem in response.json()["error"]


async def test_stream_input_errors_are_400_json_before_any_line(runtime: AsyncClient) -> None:
    for arguments in (
        {},
        {"message": "hi"},
        {"message": {"parts": [{"image": "x"}]}, "user_id": "a"},
    ):
        response = await stream(runtime, "async_stream_query", **arguments)
        assert response.status_code == 400, arguments
        assert set(response.json()) == {"error"}


async def test_a_model_failure_before_streaming_is_a_json_error(
    runtime_openai: AsyncClient, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script([{"error": {"status": 500, "message": "model down"}, "repeat": True}])
    unary = await call(runtime_openai, "query", message="hi")
    assert unary.status_code == 500 and "model down" in unary.json()["error"]
    streamed = await stream(runtime_openai, "stream_query", message="hi")
    assert streamed.status_code == 500
    assert streamed.headers["content-type"] == "application/json"
    assert "model down" in streamed.json()["error"]


async def test_a_model_failure_after_streaming_started_ends_with_an_error_line(
    runtime_openai: AsyncClient, fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(
        [
            {"content": "Let me check.", "tool_calls": [WEATHER_CALL]},
            {"error": {"status": 500, "message": "model down"}, "repeat": True},
        ]
    )
    response = await stream(runtime_openai, "stream_query", message="Weather in Jakarta?")
    assert response.status_code == 200
    chunks = lines(response)
    assert "".join(chunk.get("output", "") for chunk in chunks[:-1]) == "Let me check."
    assert set(chunks[-1]) == {"error"} and "model down" in chunks[-1]["error"]

    fake_openai.script(
        [
            {"tool_calls": [WEATHER_CALL]},
            {"error": {"status": 500, "message": "model down"}, "repeat": True},
        ]
    )
    adk = await stream(runtime_openai, "async_stream_query", message="Weather?", user_id="ana")
    assert adk.status_code == 200
    events = lines(adk)
    assert "function_call" in events[0]["content"]["parts"][0]
    assert set(events[-1]) == {"error"} and "model down" in events[-1]["error"]


EMAIL_REQUEST = "Send an email to ana@example.com about lunch"
SEND_EMAIL_REVIEW = {
    "action_name": "send_email",
    "allowed_decisions": ["approve", "edit", "reject"],
}


@pytest.fixture
async def reviewing(settings_factory: Callable[..., Settings]) -> AsyncIterator[AsyncClient]:
    """The runtime serving the Human-in-the-loop feature (send_email waits for a decision)."""
    settings = settings_factory(runtime_enabled=True, workers=0, runtime_agent="Human-in-the-loop")
    async for client in start_client(create_app(settings)):
        yield client


async def test_query_answers_a_pause_with_its_review_and_decisions_resume_it(
    reviewing: AsyncClient,
) -> None:
    session = (await output(reviewing, "create_session", user_id="ana"))["id"]
    ids = {"user_id": "ana", "session_id": session}
    paused = await output(reviewing, "query", message=EMAIL_REQUEST, **ids)
    [request] = paused["pending_review"]["action_requests"]
    assert request["name"] == "send_email" and request["args"]["to"] == "ana@example.com"
    assert paused["pending_review"]["review_configs"] == [SEND_EMAIL_REVIEW]
    # A message while the review waits would replace it; decisions that do not fit are 400.
    wrong = await call(reviewing, "query", decisions=[{"type": "edit"}], **ids)
    assert wrong.status_code == 400 and "input.decisions: decision 1" in wrong.json()["error"]
    edited = {"name": "send_email", "args": {"to": "cak@example.com", "subject": "Hi", "body": "x"}}
    answer = await output(
        reviewing, "query", decisions=[{"type": "edit", "edited_action": edited}], **ids
    )
    assert isinstance(answer, str) and "cak@example.com" in answer
    again = await call(reviewing, "query", decisions=[{"type": "approve"}], **ids)
    assert again.status_code == 409 and "not waiting" in again.json()["error"]
    events = (await output(reviewing, "get_session", **ids))["events"]
    [reply] = [e for e in events if "function_response" in e["content"]["parts"][0]]
    assert (
        "cak@example.com" in reply["content"]["parts"][0]["function_response"]["response"]["result"]
    )


async def test_stream_query_ends_a_pause_with_its_review_and_a_rejection_resumes_it(
    reviewing: AsyncClient,
) -> None:
    session = (await output(reviewing, "create_session", user_id="ana"))["id"]
    ids = {"user_id": "ana", "session_id": session}
    paused = await stream(reviewing, "stream_query", message=EMAIL_REQUEST, **ids)
    assert paused.status_code == 200
    last = lines(paused)[-1]
    assert set(last) == {"pending_review"}
    assert last["pending_review"]["action_requests"][0]["name"] == "send_email"
    rejected = await stream(
        reviewing, "stream_query", decisions=[{"type": "reject", "message": "not now"}], **ids
    )
    assert rejected.status_code == 200
    chunks = lines(rejected)
    assert chunks and all(set(chunk) == {"output"} for chunk in chunks)
    events = (await output(reviewing, "get_session", **ids))["events"]
    [reply] = [e for e in events if "function_response" in e["content"]["parts"][0]]
    assert reply["content"]["parts"][0]["function_response"]["response"] == {"error": "not now"}


async def test_async_stream_query_pauses_with_a_long_running_call_answered_by_a_response(
    reviewing: AsyncClient,
) -> None:
    paused = await stream(reviewing, "async_stream_query", message=EMAIL_REQUEST, user_id="ana")
    assert paused.status_code == 200
    events = lines(paused)
    model_call = events[0]["content"]["parts"][0]["function_call"]
    assert model_call["name"] == "send_email"
    review = events[-1]
    [part] = review["content"]["parts"]
    call_id = part["function_call"]["id"]
    assert review["long_running_tool_ids"] == [call_id]
    assert part["function_call"]["name"] == "juru_review"
    assert part["function_call"]["args"]["review_configs"] == [SEND_EMAIL_REVIEW]
    assert "long_running_tool_ids" not in events[0]
    session = (await output(reviewing, "list_sessions", user_id="ana"))["sessions"][0]["id"]

    def answer(decisions: list[dict[str, Any]]) -> dict[str, Any]:
        response = {"id": call_id, "name": "juru_review", "response": {"decisions": decisions}}
        return {"role": "user", "parts": [{"function_response": response}]}

    ids = {"user_id": "ana", "session_id": session}
    wrong = await stream(reviewing, "async_stream_query", message=answer([]), **ids)
    assert wrong.status_code == 400 and "expected 1 decision" in wrong.json()["error"]
    resumed = await stream(
        reviewing, "async_stream_query", message=answer([{"type": "approve"}]), **ids
    )
    assert resumed.status_code == 200
    resumed_events = lines(resumed)
    kinds = [next(iter(event["content"]["parts"][0])) for event in resumed_events]
    assert kinds == ["function_response", "text"]
    result = resumed_events[0]["content"]["parts"][0]["function_response"]
    assert (result["id"], result["name"]) == (model_call["id"], "send_email")
    assert "E-mail to ana@example.com" in result["response"]["result"]
    again = await stream(
        reviewing, "async_stream_query", message=answer([{"type": "approve"}]), **ids
    )
    assert again.status_code == 409
    no_session = await stream(
        reviewing, "async_stream_query", message=answer([{"type": "approve"}]), user_id="ana"
    )
    assert no_session.status_code == 400 and "session_id" in no_session.json()["error"]


async def test_a_message_instead_of_decisions_replaces_the_pause(reviewing: AsyncClient) -> None:
    session = (await output(reviewing, "create_session", user_id="ana"))["id"]
    ids = {"user_id": "ana", "session_id": session}
    assert "pending_review" in await output(reviewing, "query", message=EMAIL_REQUEST, **ids)
    weather = await output(reviewing, "query", message="What is the weather in Rome?", **ids)
    assert "Rome" in weather


async def test_a_hosted_agent_is_served_by_id_and_metered(
    settings_factory: Callable[..., Settings],
) -> None:
    first = create_app(settings_factory(workers=0))
    async for client in start_client(first):
        accounts = first.state.context.accounts
        owner = await accounts.create_account("owner", "paid", Decimal(0))
        issued = await accounts.create_key("owner")
        client.headers["Authorization"] = f"Bearer {issued.secret}"
        spec = {"name": "helper", "model_id": "juru/demo", "system_prompt": "Be brief."}
        agent = (await client.post("/v1/agents", json=spec)).json()
        with_tools = {**spec, "tools": [WEATHER_TOOL]}
        tooled = (await client.post("/v1/agents", json=with_tools)).json()
    settings = settings_factory(runtime_enabled=True, workers=0, runtime_agent=agent["id"])
    app = create_app(settings)
    async for client in start_client(app):
        answer = await output(client, "query", message="My name is Ana")
        assert "Ana" in answer
        session = await output(client, "create_session", user_id="ana")
        assert session["app_name"] == agent["id"]
        context = app.state.context
        usage = await usage_by_day(context.engine, owner.id, None, None)
        assert [(line.source, line.calls) for line in usage] == [("runtime", 1)]
    settings = settings_factory(runtime_enabled=True, workers=0, runtime_agent=tooled["id"])
    async for client in start_client(create_app(settings)):
        refused = await call(client, "query", message="Weather?")
        assert refused.status_code == 503
        assert "client-executed tools (get_weather)" in refused.json()["error"]


async def test_a_missing_hosted_agent_is_503_and_a_bad_name_fails_at_start(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(runtime_enabled=True, workers=0, runtime_agent="agt_nothing")
    async for client in start_client(create_app(settings)):
        response = await call(client, "query", message="hi")
        assert response.status_code == 503 and "agt_nothing" in response.json()["error"]
    bad = create_app(settings_factory(runtime_enabled=True, runtime_agent="NoSuchFeature"))
    with pytest.raises(RuntimeAgentConfigError, match="NoSuchFeature"):
        async with bad.router.lifespan_context(bad):
            pass


async def test_a_runtime_token_is_required_as_bearer_when_set(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(runtime_enabled=True, workers=0, runtime_token="s3cret-token")
    body = {"class_method": "list_sessions", "input": {"user_id": "ana"}}
    async for client in start_client(create_app(settings)):
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": "Bearer s3cret-token-and-more"},
            {"Authorization": "Basic s3cret-token"},
            {"Authorization": "s3cret-token"},
        ):
            for path in (UNARY, STREAM):
                refused = await client.post(path, json=body, headers=headers)
                assert refused.status_code == 401, (path, headers)
                assert set(refused.json()) == {"error"}
                assert "JURU_RUNTIME_TOKEN" in refused.json()["error"]
        unchecked = await client.post(UNARY, json={"input": "not even a method"})
        assert unchecked.status_code == 401
        good = {"Authorization": "Bearer s3cret-token"}
        admitted = await client.post(UNARY, json=body, headers=good)
        assert admitted.status_code == 200 and admitted.json() == {"output": {"sessions": []}}
        query = {"class_method": "stream_query", "input": {"message": "hi"}}
        streamed = await client.post(STREAM, json=query, headers=good)
        assert streamed.status_code == 200 and lines(streamed)
    assert settings_factory(runtime_token="").runtime_token is None


async def test_the_endpoints_are_404_while_the_runtime_is_off(
    settings_factory: Callable[..., Settings],
) -> None:
    settings = settings_factory(workers=0)
    assert settings.runtime_enabled is False
    async for client in start_client(create_app(settings)):
        for path in (UNARY, STREAM):
            response = await client.post(
                path, json={"class_method": "query", "input": {"message": "hi"}}
            )
            assert response.status_code == 404
